/** The shared components of every page: fields, checkboxes, error banner, buttons, dialog, table, toasts, page title. */
import type { ButtonHTMLAttributes, ComponentChildren, TargetedEvent } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import type { Problem } from '../api';

/**
 * Sets document.title to "<title> · imagegen console". A passive effect on purpose: it comes after the shell's
 * route title (a layout effect, app.tsx), which it refines.
 */
export function usePageTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · imagegen console`;
  }, [title]);
}

interface FieldProps {
  label: string;
  value: string;
  onInput: (v: string) => void;
  /** The limit, shown live as "n / max" and enforced in the field. */
  max?: number;
  /** The error of this field (from the API's details or a local check), shown next to it. */
  error?: string;
  hint?: string;
  multiline?: boolean;
  type?: 'text' | 'password' | 'email' | 'search' | 'number' | 'url' | 'date';
  name?: string;
  required?: boolean;
  autoComplete?: string;
  rows?: number;
}

/** A labelled input or textarea with its live length limit and its error text next to it. */
export function Field(p: FieldProps) {
  const id = useId();
  const over = p.max !== undefined && p.value.length > p.max;
  const describedBy = [p.hint ? `${id}-hint` : '', p.max !== undefined ? `${id}-count` : '', p.error ? `${id}-err` : '']
    .filter(Boolean)
    .join(' ');
  const common = {
    id,
    name: p.name,
    value: p.value,
    required: p.required,
    'aria-invalid': p.error || over ? true : undefined,
    'aria-describedby': describedBy || undefined,
    onInput: (e: TargetedEvent<HTMLInputElement | HTMLTextAreaElement>) => p.onInput(e.currentTarget.value),
  };
  return (
    <div class={`field${p.error || over ? ' field-invalid' : ''}`}>
      <label for={id}>{p.label}</label>
      {p.multiline ? (
        <textarea {...common} rows={p.rows ?? 4} />
      ) : (
        <input {...common} type={(p.type ?? 'text') as 'text'} autoComplete={p.autoComplete} />
      )}
      <div class="field-meta">
        {p.hint && <span id={`${id}-hint`}>{p.hint}</span>}
        {p.max !== undefined && (
          <span id={`${id}-count`} class={over ? 'count over' : 'count'} aria-live="polite">
            {p.value.length.toLocaleString()} / {p.max.toLocaleString()}
            {over ? ` (${(p.value.length - p.max).toLocaleString()} too many)` : ''}
          </span>
        )}
      </div>
      {p.error && (
        <p id={`${id}-err`} class="field-error" role="alert">
          {p.error}
        </p>
      )}
    </div>
  );
}

/** An API failure in words (402 quota, 429 and the wait, 400 and its details, content blocked), next to its action. */
export function ErrorBanner({ problem, onDismiss }: { problem?: Problem; onDismiss?: () => void }) {
  if (!problem) return null;
  return (
    <div class="banner banner-error" role="alert">
      <p>
        <strong>{problem.title}</strong>
      </p>
      {problem.details.length > 0 && (
        <ul class="banner-list">
          {problem.details.map((d) => (
            <li key={d}>{d}</li>
          ))}
        </ul>
      )}
      {onDismiss && (
        <button type="button" class="btn btn-quiet" onClick={onDismiss}>
          Dismiss
        </button>
      )}
    </div>
  );
}

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & { variant?: 'primary' | 'danger' | 'quiet'; busy?: boolean };

/** A labelled checkbox. */
export function Check(props: { label: string; checked: boolean; onChange: (v: boolean) => void; disabled?: boolean }) {
  return (
    <label class="check">
      <input type="checkbox" checked={props.checked} disabled={props.disabled} onChange={(e) => props.onChange(e.currentTarget.checked)} />{' '}
      {props.label}
    </label>
  );
}

/** A button; busy disables it and says so to screen readers. */
export function Button({ variant, busy, children, class: cls, type, disabled, ...rest }: ButtonProps) {
  return (
    <button
      {...rest}
      type={(type as 'button' | 'submit' | 'reset' | undefined) ?? 'button'}
      class={`btn${variant ? ` btn-${variant}` : ''}${cls ? ` ${cls}` : ''}`}
      disabled={Boolean(disabled) || busy}
      aria-busy={busy || undefined}
    >
      {children}
    </button>
  );
}

/**
 * A modal dialog: the native <dialog> opened with showModal() (focus held inside, Escape closes), labelled by its
 * title; focus returns to the element that opened it when it closes (or is removed). With `focusClose`, the close
 * button (labelled `closeLabel`) takes the focus first: the safe choice of a confirmation.
 */
export function Dialog(props: {
  open: boolean;
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  actions?: ComponentChildren;
  closeLabel?: string;
  focusClose?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLElement | null>(null);
  const titleId = useId();
  const giveFocusBack = () => {
    const el = opener.current;
    opener.current = null;
    if (el?.isConnected) el.focus();
  };
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) {
      opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
      d.showModal();
      if (props.focusClose) d.querySelector<HTMLElement>('.dialog-close')?.focus();
    }
    if (!props.open && d.open) d.close();
  }, [props.open]);
  useEffect(() => giveFocusBack, []);
  return (
    <dialog
      ref={ref}
      class="dialog"
      aria-labelledby={titleId}
      onClose={() => {
        giveFocusBack();
        props.onClose();
      }}
    >
      <h2 id={titleId}>{props.title}</h2>
      <div class="dialog-body">{props.children}</div>
      <div class="dialog-actions">
        {props.actions}
        <Button variant="quiet" class="dialog-close" onClick={props.onClose}>
          {props.closeLabel ?? 'Close'}
        </Button>
      </div>
    </dialog>
  );
}

/** What a confirmation asks: its title (the question), what happens, and the words of the button that does it. */
export interface ConfirmRequest {
  title: string;
  body: ComponentChildren;
  confirmLabel: string;
}

/**
 * A confirmation in an accessible modal dialog (in place of the browser's confirm()): Cancel has the focus, Escape
 * cancels, and focus returns to the button that asked. `ask` resolves true when confirmed, false when cancelled;
 * render `dialog` once in the page.
 */
export function useConfirm(): { dialog: ComponentChildren; ask: (req: ConfirmRequest) => Promise<boolean> } {
  const [req, setReq] = useState<ConfirmRequest | null>(null);
  const answer = useRef<((ok: boolean) => void) | null>(null);
  const settle = (ok: boolean) => {
    const a = answer.current;
    answer.current = null;
    setReq(null);
    a?.(ok);
  };
  useEffect(() => () => answer.current?.(false), []);
  const dialog = req && (
    <Dialog
      open
      title={req.title}
      onClose={() => settle(false)}
      closeLabel="Cancel"
      focusClose
      actions={
        <Button variant="danger" onClick={() => settle(true)}>
          {req.confirmLabel}
        </Button>
      }
    >
      {req.body}
    </Dialog>
  );
  return {
    dialog,
    ask: (r) => {
      answer.current?.(false);
      setReq(r);
      return new Promise<boolean>((resolve) => {
        answer.current = resolve;
      });
    },
  };
}

export interface Column<T> {
  label: string;
  cell: (row: T) => ComponentChildren;
}

/** A table with a caption; scrolls sideways on a narrow screen instead of overflowing the page. */
export function Table<T>(props: { caption: string; columns: Column<T>[]; rows: T[]; rowKey: (row: T) => string; empty?: string }) {
  return (
    <div class="table-wrap">
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c.label} scope="col">
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.length === 0 ? (
            <tr>
              <td colSpan={props.columns.length}>{props.empty ?? 'Nothing yet.'}</td>
            </tr>
          ) : (
            props.rows.map((r) => (
              <tr key={props.rowKey(r)}>
                {props.columns.map((c) => (
                  <td key={c.label}>{c.cell(r)}</td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

// ---- toasts ----

interface Toast {
  id: number;
  text: string;
  kind: 'ok' | 'error';
}
let toasts: Toast[] = [];
let toastSeq = 0;
const toastListeners = new Set<() => void>();

/** Shows a short message for 5 s (announced by screen readers). */
export function toast(text: string, kind: Toast['kind'] = 'ok'): void {
  const t = { id: ++toastSeq, text, kind };
  toasts = [...toasts, t];
  for (const l of toastListeners) l();
  setTimeout(() => {
    toasts = toasts.filter((x) => x.id !== t.id);
    for (const l of toastListeners) l();
  }, 5000);
}

export function Toasts() {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    toastListeners.add(l);
    return () => void toastListeners.delete(l);
  }, []);
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          {t.text}
        </div>
      ))}
    </div>
  );
}

/** Loads something once per dependency change: {value, problem, loading, reload}. */
export function useLoad<T>(load: () => Promise<{ value?: T; problem?: Problem }>, deps: unknown[]) {
  const [state, setState] = useState<{ value?: T; problem?: Problem; loading: boolean }>({ loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (r) => live && setState({ ...r, loading: false }),
      (err) => live && setState({ problem: { status: 0, title: String(err), details: [], fields: {} }, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  return { ...state, reload: () => setN((x) => x + 1) };
}
