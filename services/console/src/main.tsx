import { render } from 'preact';
import { App } from './app';
import { loadSession } from './session';
import './styles.css';

render(<App />, document.getElementById('app') as HTMLElement);
void loadSession();
