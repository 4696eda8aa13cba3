/**
 * Follows an execution or session stream (server-sent events over the session cookie: GET, same origin, so
 * EventSource needs no header): log lines, status changes, and the final complete or error, after which the stream
 * is closed (the server ends it too; EventSource would otherwise reconnect).
 */
import { useEffect, useState } from 'preact/hooks';
import { recheckSession } from '../session';

export interface LiveLog {
  executionId: string;
  timestamp: string;
  message: string;
  level: 'info' | 'warn' | 'error';
}
export interface LiveStatus {
  executionId: string;
  status: string;
  progressPercent: number;
  currentStep: string | null;
}
export interface LiveState {
  logs: LiveLog[];
  status: Record<string, LiveStatus>;
  /** connecting, live, ended (complete/error of an execution stream) or lost (the connection failed). */
  state: 'connecting' | 'live' | 'ended' | 'lost';
  error?: string;
}

/** `url` null: nothing to follow. `endOnFinal`: an execution stream ends with its complete or error event. */
export function useLiveStream(url: string | null, endOnFinal: boolean, onFinal?: () => void): LiveState {
  const [live, setLive] = useState<LiveState>({ logs: [], status: {}, state: 'connecting' });
  useEffect(() => {
    if (!url) return;
    setLive({ logs: [], status: {}, state: 'connecting' });
    const es = new EventSource(url);
    const parse = (e: MessageEvent) => {
      try {
        return JSON.parse(e.data);
      } catch {
        return undefined;
      }
    };
    es.onopen = () => setLive((s) => ({ ...s, state: s.state === 'ended' ? s.state : 'live' }));
    es.addEventListener('log', (e) => {
      const d = parse(e as MessageEvent);
      if (d) setLive((s) => ({ ...s, logs: [...s.logs, d] }));
    });
    es.addEventListener('status', (e) => {
      const d = parse(e as MessageEvent);
      if (d) setLive((s) => ({ ...s, status: { ...s.status, [d.executionId]: d } }));
    });
    const final = (e: Event, error?: boolean) => {
      const d = (e as MessageEvent).data === undefined ? undefined : parse(e as MessageEvent);
      if (!d && error) {
        // A connection error (no data): EventSource retries by itself unless the stream was ended.
        setLive((s) => (s.state === 'ended' ? s : { ...s, state: es.readyState === EventSource.CLOSED ? 'lost' : 'connecting' }));
        // Refused (a reconnection answered 401, which EventSource does not retry): if the session is over, the
        // session check brings the sign-in back, remembering this page.
        if (es.readyState === EventSource.CLOSED) void recheckSession();
        return;
      }
      if (endOnFinal) {
        es.close();
        setLive((s) => ({ ...s, state: 'ended', error: error ? d?.error : undefined }));
        onFinal?.();
      } else if (error && d?.error && !d.executionId) {
        setLive((s) => ({ ...s, error: d.error }));
      } else onFinal?.();
    };
    es.addEventListener('complete', (e) => final(e));
    es.addEventListener('error', (e) => final(e, true));
    return () => es.close();
  }, [url]);
  return live;
}
