interface CompiledRoute {
  method: string;
  pattern: string;
  regex: RegExp;
}

/**
 * Matches a request to its route pattern (`/v1/transcript/:transcriptID`) without Express, so a
 * request refused before routing (a body over the limit, malformed JSON) is still counted under
 * its route rather than under its raw path, whose IDs would make every request a new label.
 */
export function createRouteMatcher(routes: readonly { method: string; path: string }[]) {
  const compiled: CompiledRoute[] = routes.map((route) => ({
    method: route.method,
    pattern: route.path,
    regex: new RegExp(
      `^${route.path
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`)))
        .join('/')}/?$`,
    ),
  }));
  return (method: string, path: string): string | null => {
    for (const route of compiled) if (route.method === method && route.regex.test(path)) return route.pattern;
    return null;
  };
}
