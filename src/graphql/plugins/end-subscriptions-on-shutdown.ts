import type { ExecutionResult } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import { endOnAbort } from '../../ops/shutdown';
import type { Context, RestOperationMarker } from '../context';

/**
 * At shutdown, GraphQL subscriptions (which never end by themselves) complete at once, so their
 * clients can reconnect to another instance. The runtime's REST streams are left alone: each is one
 * turn, which finishes and sends its own `end`.
 */
export function useEndSubscriptionsOnShutdown(signal: AbortSignal): Plugin<Context> {
  return {
    onSubscribe({ args }) {
      if ((args.contextValue as Context & RestOperationMarker).restRoute) return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (isAsyncIterable(result)) setResult(endOnAbort(result as AsyncIterable<ExecutionResult>, signal));
        },
      };
    },
  };
}
