// Vite bundles the CSS a module imports.
declare module '*.css';
declare module '*?raw' {
	const text: string;
	export default text;
}
