import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

export interface EnvironmentInfo {
  id: string;
  alias: string;
}

export interface ProjectInfo {
  id: string;
  name: string;
  workspaceID: string;
  environments: EnvironmentInfo[];
}

export interface Viewer {
  kind: 'key' | 'operator';
  keyID: string | null;
  projectID: string | null;
  workspaceID: string | null;
  scopes: string[];
}

export interface ConsoleContext {
  viewer: Viewer;
  project: ProjectInfo;
  /** Whether the signed-in key may use `scope` (the operator may use all). */
  can(scope: string): boolean;
  reloadProject(): void;
}

export const Ctx = createContext<ConsoleContext | null>(null);

export function useConsole(): ConsoleContext {
  const ctx = useContext(Ctx);
  if (!ctx) throw new Error('no console context');
  return ctx;
}
