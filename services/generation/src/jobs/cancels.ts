/**
 * The cancels of the executions this process runs (synchronous calls and claimed jobs alike): a cancel asked for
 * through any replica (CancelExecution marks the row) reaches the process running it at its next poll
 * (JobRunner.checkCancels), which aborts that execution's signal: its provider call stops, and it ends 'cancelled'.
 */
export interface CancelRegistry {
  /** Registers a running execution; `done()` when it ended. */
  track(executionId: string): { signal: AbortSignal; done(): void };
  /** Aborts the execution if it runs here; whether it did. */
  abort(executionId: string): boolean;
  /** The executions running here. */
  running(): string[];
}

export function cancelRegistry(): CancelRegistry {
  const running = new Map<string, AbortController>();
  return {
    track(executionId) {
      const c = new AbortController();
      running.set(executionId, c);
      return {
        signal: c.signal,
        done: () => {
          if (running.get(executionId) === c) running.delete(executionId);
        },
      };
    },
    abort(executionId) {
      const c = running.get(executionId);
      if (!c) return false;
      c.abort(new Error('Execution cancelled'));
      return true;
    },
    running: () => [...running.keys()],
  };
}
