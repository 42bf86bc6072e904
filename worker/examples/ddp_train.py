#!/usr/bin/python3
"""A small PyTorch DistributedDataParallel job for Trainyard.

Trains a linear regression on synthetic, deterministic data using only the
environment the executor (or torchrun) provides: init_process_group("env://")
with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; backend nccl when CUDA is
available, gloo otherwise. Checkpoints every --checkpoint-every steps under
TRAINYARD_CHECKPOINT_DIR (DESIGN.md §7, through the SDK's trainyard.checkpoint),
resumes from TRAINYARD_RESUME_FROM, checkpoints and exits 75 on SIGUSR1 (the
checkpoint signal), rewrites TRAINYARD_PROGRESS_FILE every step
(trainyard.job.progress).

Every rank prints JSON lines on stdout (see worker/README.md); the last one
is {"event": "done", ..., "loss": L, "ok": L < --target-loss}. Exit status:
0 when the loss is below --target-loss, 1 when not, 2 on bad arguments or
checkpoint, 75 after a checkpoint on SIGUSR1.
"""

import argparse
import datetime
import json
import os
import signal
import sys

_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src")
if os.path.isdir(_SDK):
    sys.path.insert(0, _SDK)
from trainyard import checkpoint as ckpt, job  # noqa: E402

EXIT_NOT_CONVERGED = 1
EXIT_USAGE = 2
EXIT_CHECKPOINTED = 75  # EX_TEMPFAIL: stopped on request, resume later

FEATURES = 8
_signalled = False


def emit(**fields):
    print(json.dumps(fields), flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="train until this step (default 200)")
    p.add_argument("--checkpoint-every", type=int, default=50, metavar="K",
                   help="checkpoint every K steps, 0: only at the end and on SIGUSR1 (default 50)")
    p.add_argument("--target-loss", type=float, default=0.01,
                   help="exit 1 unless the final loss is below this (default 0.01)")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step (default 32)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--seed", type=int, default=1, help="seed of data and model (default 1)")
    p.add_argument("--step-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="sleep after each step (to give a signal time to arrive in tests)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="limit on the rendezvous and each collective (default 120)")
    a = p.parse_args(argv)
    if a.steps < 1 or a.checkpoint_every < 0 or a.batch < 1 or not a.lr > 0:
        p.error("--steps and --batch must be >= 1, --checkpoint-every >= 0, --lr > 0")
    return a


def on_checkpoint_signal(signum, frame):
    global _signalled
    _signalled = True


def main(argv):
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError as e:
        print(f"ddp_train: cannot import torch ({e}); install python3-torch", file=sys.stderr)
        return EXIT_USAGE

    signal.signal(signal.SIGUSR1, on_checkpoint_signal)
    env = job.env()
    rank, world, local_rank = env.rank, env.world_size, env.local_rank
    ckpt_dir = env.checkpoint_dir

    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    device = torch.device(f"cuda:{local_rank % torch.cuda.device_count()}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout))

    # the truth every rank's data comes from; the model starts elsewhere
    g = torch.Generator().manual_seed(args.seed)
    w_true = torch.randn(FEATURES, 1, generator=g)
    b_true = torch.randn(1, generator=g)
    torch.manual_seed(args.seed + 1000)
    model = torch.nn.Linear(FEATURES, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)

    start = 0
    resume = ckpt.resume_from()
    if resume:
        try:
            manifest = ckpt.verify(resume)
        except ckpt.CheckpointError as e:
            print(f"ddp_train: rank {rank}: cannot resume: {e}", file=sys.stderr)
            return EXIT_USAGE
        state = torch.load(os.path.join(resume, "state.pt"), map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = manifest["step"]
        emit(event="resumed", rank=rank, step=start, path=resume)

    ddp = DDP(model, device_ids=[device.index] if use_cuda else None)
    loss_fn = torch.nn.MSELoss()

    def checkpoint(step):
        # every rank holds the same weights; rank 0 writes, the rest wait for it
        if rank == 0 and ckpt_dir:
            def write(f):
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f)
            path = ckpt.save(step, {"state.pt": write}, ckpt_dir)
            emit(event="checkpoint", rank=rank, step=step, path=path)
        dist.barrier()

    step = start
    stop = torch.zeros(1, device=device)
    while step < args.steps:
        # deterministic per (seed, step, rank): a resumed run sees the same data
        gs = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 4099 + rank)
        x = torch.randn(args.batch, FEATURES, generator=gs)
        y = x @ w_true + b_true
        opt.zero_grad()
        loss = loss_fn(ddp(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        step += 1
        job.progress(step)
        if args.step_sleep:
            import time
            time.sleep(args.step_sleep)
        # the checkpoint signal may reach only some ranks: agree before acting
        stop.fill_(1.0 if _signalled else 0.0)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item() > 0:
            checkpoint(step)
            emit(event="stopped", rank=rank, step=step, reason="checkpoint signal")
            dist.destroy_process_group()
            return EXIT_CHECKPOINTED
        if args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps:
            checkpoint(step)
    if step > start:
        checkpoint(step)

    # the same fixed evaluation set on every rank
    ge = torch.Generator().manual_seed(args.seed + 7)
    xe = torch.randn(256, FEATURES, generator=ge)
    with torch.no_grad():
        final = loss_fn(model(xe.to(device)), (xe @ w_true + b_true).to(device)).item()
    ok = final < args.target_loss
    emit(event="done", rank=rank, world_size=world, backend=backend, start_step=start,
         steps=step, loss=final, target_loss=args.target_loss, ok=ok)
    dist.destroy_process_group()
    return 0 if ok else EXIT_NOT_CONVERGED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
