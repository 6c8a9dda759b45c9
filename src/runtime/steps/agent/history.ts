import { type ChatMessage, countChatTokens } from '../../../llm';

/**
 * The conversation an agent step holds, bounded by a token budget. Messages are grouped by user
 * turn (a user message and the assistant messages and tool results that answered it); when the
 * conversation is over budget the OLDEST turns are dropped whole, never summarised, so a tool
 * result never loses the call it answers. The current turn is always kept.
 */

/** Splits messages into turns, each starting at a user message. */
function turnsOf(messages: readonly ChatMessage[]): ChatMessage[][] {
  const turns: ChatMessage[][] = [];
  for (const m of messages) {
    if (m.role === 'user' || turns.length === 0) turns.push([m]);
    else turns.at(-1)!.push(m);
  }
  return turns;
}

/** The newest turns that fit `budget` tokens together with `fixed` (the instructions). */
export function fitHistory(
  messages: readonly ChatMessage[],
  budget: number,
  fixed: readonly ChatMessage[] = [],
): { messages: ChatMessage[]; droppedTurns: number } {
  const turns = turnsOf(messages);
  let dropped = 0;
  while (turns.length > 1 && countChatTokens([...fixed, ...turns.flat()]) > budget) {
    turns.shift();
    dropped++;
  }
  return { messages: turns.flat(), droppedTurns: dropped };
}
