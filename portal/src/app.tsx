// The shell: hash routing, who is signed in, the sign-in page, the
// unreachable-API banner, and the page of the current route.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, clearToken, getToken, setHandlers, setToken, type Whoami } from './api';
import { parseRoute, type Route } from './format';
import { QueuePage } from './pages/queue';
import { JobsPage } from './pages/jobs';
import { JobPage } from './pages/job';
import { TeamsPage, TeamPage } from './pages/teams';
import { NodesPage } from './pages/nodes';
import { UsagePage } from './pages/usage';
import { SweepsPage, SweepPage } from './pages/sweeps';

export interface PageProps { who: Whoami; arg: string | null }

const NAV: [string, string][] = [
	['queue', 'Queue'], ['jobs', 'Jobs'], ['teams', 'Teams'],
	['nodes', 'Nodes'], ['usage', 'Usage'], ['sweeps', 'Sweeps'],
];

function go(hash: string) {
	if (location.hash !== hash) location.hash = hash;
}

export function App() {
	const [route, setRoute] = useState<Route>(parseRoute(location.hash));
	const [who, setWho] = useState<Whoami | null>(null);
	const [loginMessage, setLoginMessage] = useState<string | null>(null);
	const [unreachable, setUnreachable] = useState(false);
	const [epoch, setEpoch] = useState(0);

	useEffect(() => {
		setHandlers({
			unauthorized(detail) {
				setWho(null);
				setLoginMessage(detail);
				go('#/login');
			},
			unreachable: () => setUnreachable(true),
			reachable: () => setUnreachable(false),
		});
		const on = () => setRoute(parseRoute(location.hash));
		window.addEventListener('hashchange', on);
		return () => window.removeEventListener('hashchange', on);
	}, []);

	// a reload keeps the token (sessionStorage): learn who it is again
	useEffect(() => {
		if (who || !getToken()) return;
		api.whoami().then(setWho, () => {});
	}, [who, epoch]);

	const signedIn = getToken() !== null;
	useEffect(() => {
		if (!signedIn && route.page !== 'login') go('#/login');
		if (signedIn && route.page === 'login' && who) go('#/queue');
	}, [signedIn, route.page, who]);

	const banner = unreachable ? (
		<div role="alert" class="banner">
			Cannot reach the API.{' '}
			<button type="button" onClick={() => { setUnreachable(false); setEpoch((e) => e + 1); }}>Retry</button>
		</div>
	) : null;

	if (!signedIn || route.page === 'login') {
		return (
			<>
				{banner}
				<Login message={loginMessage} onSignedIn={(w) => { setLoginMessage(null); setWho(w); go('#/queue'); }} />
			</>
		);
	}

	return (
		<>
			<header class="top">
				<a class="brand" href="#/queue">Trainyard</a>
				<nav aria-label="Main">
					<ul>
						{NAV.map(([page, label]) => (
							<li key={page}>
								<a href={`#/${page}`} aria-current={route.page === page ? 'page' : undefined}>{label}</a>
							</li>
						))}
					</ul>
				</nav>
				<div class="who">
					{who ? (
						<span>
							Signed in as <strong>{who.token}</strong> · {who.team ?? 'all teams'} · {who.role}
						</span>
					) : null}
					<button type="button" onClick={() => { clearToken(); setWho(null); setLoginMessage(null); go('#/login'); }}>
						Sign out
					</button>
				</div>
			</header>
			{banner}
			<main key={epoch}>{who ? <Page route={route} who={who} /> : <p class="muted">Loading…</p>}</main>
		</>
	);
}

function Page({ route, who }: { route: Route; who: Whoami }) {
	const p: PageProps = { who, arg: route.arg };
	switch (route.page) {
	case 'queue': return <QueuePage {...p} />;
	case 'jobs': return route.arg === null ? <JobsPage {...p} /> : <JobPage {...p} />;
	case 'teams': return route.arg === null ? <TeamsPage {...p} /> : <TeamPage {...p} />;
	case 'nodes': return <NodesPage {...p} />;
	case 'usage': return <UsagePage {...p} />;
	case 'sweeps': return route.arg === null ? <SweepsPage {...p} /> : <SweepPage {...p} />;
	default:
		return (
			<>
				<h1>Not found</h1>
				<p>There is no page at {location.hash}. <a href="#/queue">Go to the queue</a>.</p>
			</>
		);
	}
}

function Login(props: { message: string | null; onSignedIn: (w: Whoami) => void }) {
	const [token, setTokenText] = useState('');
	const [message, setMessage] = useState<string | null>(props.message);
	const [busy, setBusy] = useState(false);
	useEffect(() => setMessage(props.message), [props.message]);

	async function submit(e: Event) {
		e.preventDefault();
		const t = token.trim();
		if (!t) {
			setMessage('Enter an API token');
			return;
		}
		setBusy(true);
		try {
			const w = await api.whoami(t);
			setToken(t);
			props.onSignedIn(w);
		} catch (err) {
			// unreachable: the banner says so
			if (err instanceof ApiError && err.status !== 0) setMessage(err.detail);
		} finally {
			setBusy(false);
		}
	}

	return (
		<main class="login">
			<h1>Sign in</h1>
			<form onSubmit={submit}>
				<label for="token">API token</label>
				<input id="token" type="password" autocomplete="off" value={token}
					onInput={(e) => setTokenText((e.target as HTMLInputElement).value)} />
				<button type="submit" disabled={busy}>Sign in</button>
			</form>
			{message ? <p role="alert" class="error">{message}</p> : null}
		</main>
	);
}
