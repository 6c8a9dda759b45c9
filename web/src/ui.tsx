import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from './api';

let idCounter = 0;
/** A stable element ID, for label/aria links. */
export function useId(prefix: string): string {
  const ref = useRef<string>('');
  if (!ref.current) ref.current = `${prefix}-${++idCounter}`;
  return ref.current;
}

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorMessage(error)}
    </p>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {label}
    </p>
  );
}

export function Field(props: { label: string; children: (id: string) => ComponentChildren; hint?: string }) {
  const id = useId('f');
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id)}
      {props.hint ? <small class="muted">{props.hint}</small> : null}
    </div>
  );
}

/** A modal confirmation on the native <dialog> (focus trapped, Escape cancels). */
export function ConfirmButton(props: {
  label: string;
  title: string;
  message: string;
  confirmLabel: string;
  onConfirm: () => Promise<void> | void;
  danger?: boolean;
  disabled?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const titleId = useId('dlg');
  return (
    <>
      <button
        type="button"
        class={props.danger ? 'danger' : ''}
        disabled={props.disabled}
        onClick={() => {
          setError(null);
          dialog.current?.showModal();
        }}
      >
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={titleId}>
        <h2 id={titleId}>{props.title}</h2>
        <p>{props.message}</p>
        <ErrorNote error={error} />
        <div class="row">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button
            type="button"
            class={props.danger ? 'danger' : 'primary'}
            disabled={busy}
            onClick={async () => {
              setBusy(true);
              try {
                await props.onConfirm();
                dialog.current?.close();
              } catch (err) {
                setError(err);
              } finally {
                setBusy(false);
              }
            }}
          >
            {props.confirmLabel}
          </button>
        </div>
      </dialog>
    </>
  );
}

/** Runs an async loader when its inputs change; keeps the last data while reloading. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (value) => {
        if (!live) return;
        setData(value);
        setError(null);
        setLoading(false);
      },
      (err) => {
        if (!live) return;
        setError(err);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data, error, loading, reload: () => setTick((t) => t + 1), setData };
}

export function JsonBlock({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre class="json" title={label}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  const id = useId('sec');
  return (
    <section class="card" aria-labelledby={id}>
      <div class="card-head">
        <h2 id={id}>{props.title}</h2>
        {props.actions ? <div class="row">{props.actions}</div> : null}
      </div>
      {props.children}
    </section>
  );
}

/** Parses a JSON object typed by the user; null for empty, an Error for anything else. */
export function parseJsonObject(text: string, what: string): Record<string, unknown> | null {
  if (!text.trim()) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${(err as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} must be a JSON object.`);
  return value as Record<string, unknown>;
}

/** The value of the input, select or textarea an event came from. */
export const inputValue = (e: Event) => (e.currentTarget as HTMLInputElement).value;
