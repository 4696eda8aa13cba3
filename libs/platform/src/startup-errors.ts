/** The errors a process's start raises (kept apart from config.ts, which names other modules' settings). */

/** A setting that is wrong; its message is one line naming the setting (start-up prints it and exits 2). */
export class ConfigError extends Error {}

/**
 * A start-up failure whose cause is outside the code (a port taken, a database unreachable, a data folder in
 * use): its message is one line naming the cause and the setting involved; entry points print it and exit 2.
 * `code` keeps the system error code where there is one (e.g. EADDRINUSE).
 */
export class StartupError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}
