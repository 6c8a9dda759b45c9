/**
 * Why a call was stopped from our side: the caller's signal, the idle timeout, the provider being
 * closed, or the consumer leaving the stream early (breaking out of its loop).
 */
export type StopReason = 'aborted' | 'timeout' | 'closed' | 'consumer_left';

export interface CallControl {
  /** Aborts when the call must stop for any reason; pass it to the HTTP request. */
  readonly signal: AbortSignal;
  /** Null while the call may go on. */
  readonly stopReason: StopReason | null;
  /** (Re)starts the idle timer: call when waiting starts and whenever progress arrives. */
  touch(): void;
  /** Stops the idle timer, e.g. during a backoff wait we chose ourselves. */
  pause(): void;
  stop(reason: StopReason): void;
  /** Releases timers and listeners. */
  dispose(): void;
}

/**
 * One call's cancellation: merges the caller's signal and the provider's close signal with an idle
 * timer. The first reason to fire wins, so a timeout is never reported as the caller's abort.
 */
export function createCallControl(opts: {
  callerSignal?: AbortSignal;
  closeSignal: AbortSignal;
  timeoutMs: number;
}): CallControl {
  const controller = new AbortController();
  let stopReason: StopReason | null = null;
  let timer: NodeJS.Timeout | undefined;

  const stop = (reason: StopReason) => {
    if (stopReason) return;
    stopReason = reason;
    clearTimeout(timer);
    controller.abort(new Error(`call stopped: ${reason}`));
  };
  const onCallerAbort = () => stop('aborted');
  const onClose = () => stop('closed');
  if (opts.callerSignal?.aborted) stop('aborted');
  else if (opts.closeSignal.aborted) stop('closed');
  opts.callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  opts.closeSignal.addEventListener('abort', onClose, { once: true });

  return {
    signal: controller.signal,
    get stopReason() {
      return stopReason;
    },
    touch() {
      if (stopReason) return;
      clearTimeout(timer);
      timer = setTimeout(() => stop('timeout'), opts.timeoutMs);
    },
    pause() {
      clearTimeout(timer);
    },
    stop,
    dispose() {
      clearTimeout(timer);
      opts.callerSignal?.removeEventListener('abort', onCallerAbort);
      opts.closeSignal.removeEventListener('abort', onClose);
    },
  };
}
