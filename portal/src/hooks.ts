// Loading and live updates shared by the pages: reloads keep the last data on
// screen, and nothing polls while the tab is hidden.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from './api';
import { throttle } from './format';

export interface Loaded<T> {
	data: T | null;
	error: ApiError | null;
	loading: boolean;
}

export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): Loaded<T> {
	const [state, setState] = useState<Loaded<T>>({ data: null, error: null, loading: true });
	const gen = useRef(0);
	useEffect(() => {
		const mine = ++gen.current;
		setState((s) => ({ ...s, loading: true }));
		fn().then(
			(data) => mine === gen.current && setState({ data, error: null, loading: false }),
			(e) => {
				if (mine !== gen.current) return;
				const error = e instanceof ApiError ? e : new ApiError(0, 'internal', String(e));
				// the banner covers an unreachable API; what was shown stays
				setState((s) => ({ data: s.data, error: error.status === 0 ? s.error : error, loading: false }));
			},
		);
	}, deps);
	return state;
}

export function useVisible(): boolean {
	const [visible, setVisible] = useState(document.visibilityState !== 'hidden');
	useEffect(() => {
		const on = () => setVisible(document.visibilityState !== 'hidden');
		document.addEventListener('visibilitychange', on);
		return () => document.removeEventListener('visibilitychange', on);
	}, []);
	return visible;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
	return new Promise((resolve) => {
		const t = setTimeout(resolve, ms);
		signal.addEventListener('abort', () => {
			clearTimeout(t);
			resolve();
		});
	});
}

const FEED_MIN_MS = 3000; // a busy cluster's events refresh a list at most this often
const FEED_FALLBACK_MS = 10000; // without the feed, poll this often

// Calls `onChange` when the cross-job event feed (GET /v1/events) reports an
// event the token may see, and when the tab becomes visible again.
export function useFeed(onChange: () => void): void {
	const visible = useVisible();
	const cb = useRef(onChange);
	cb.current = onChange;
	const first = useRef(true);
	useEffect(() => {
		if (!visible) return;
		const ctl = new AbortController();
		const refresh = throttle(() => cb.current(), FEED_MIN_MS);
		if (!first.current) refresh();
		first.current = false;
		(async () => {
			let after: string | null = null;
			while (!ctl.signal.aborted) {
				try {
					const r = await api.feed(after === null ? {} : { after, wait: 25 }, ctl.signal);
					if (after !== null && r.events.length) refresh();
					after = r.next_after;
				} catch (e) {
					if (ctl.signal.aborted || (e instanceof ApiError && e.status === 401)) return;
					// an API without the feed, or one that is down: poll
					await sleep(FEED_FALLBACK_MS, ctl.signal);
					refresh();
					after = null;
				}
			}
		})();
		return () => {
			ctl.abort();
			refresh.cancel();
		};
	}, [visible]);
}

// Calls `fn` every `ms` while the tab is visible.
export function useInterval(fn: () => void, ms: number): void {
	const visible = useVisible();
	const cb = useRef(fn);
	cb.current = fn;
	useEffect(() => {
		if (!visible) return;
		const t = setInterval(() => cb.current(), ms);
		return () => clearInterval(t);
	}, [visible, ms]);
}

// A counter to put in useLoad's deps: bump() loads again.
export function useTick(): [number, () => void] {
	const [tick, setTick] = useState(0);
	return [tick, () => setTick((t) => t + 1)];
}
