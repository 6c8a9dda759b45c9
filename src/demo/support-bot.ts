import { buttonRequestType } from '../runtime/steps/shared';
import type { OutputTrace } from '../runtime/trace-format';
import type { RuntimeAction } from '../runtime/types';
import type { Rng } from './random';

/**
 * Conversations with the support bot of examples/support-bot/agent.json, made up step by step the
 * way its program would run them: the same flows, steps, paths, buttons (with the request types
 * the runtime gives them), texts and debug traces, so a demo transcript reads like a recorded one.
 * What a turn did (intents, API and code-step calls, success) comes along for the usage events.
 */

export const SUPPORT_BOT_NAME = 'Support bot';
/** The order API's base address: the program's default for the `order_api` variable. */
const ORDER_API = 'http://127.0.0.1:4010';

export interface SimTurn {
  action: RuntimeAction;
  /** `interactions.type`: the action type, `button` for button requests. */
  interactionType: string;
  startedAt: Date;
  finishedAt: Date;
  traces: OutputTrace[];
  intents: string[];
  apiCalls: { stepID: string; name: string; success: boolean }[];
  functionCalls: { stepID: string; name: string; success: boolean }[];
  /** False when the turn failed (timed out): its traces stop where it stopped. */
  success: boolean;
  /** The conversation reached an end or a handoff. */
  ended: boolean;
}

export type Topic = 'order tracking' | 'problem report' | 'human handoff' | 'other';

export interface SimConversation {
  turns: SimTurn[];
  ended: boolean;
  topic: Topic;
  /** What became of it, for properties and evaluation results. */
  outcome: {
    orderId: string | null;
    orderStatus: 'shipped' | 'processing' | 'cancelled' | 'not found' | 'no answer' | null;
    ticketId: string | null;
    priority: 'normal' | 'high' | null;
    handedOff: boolean;
    /** The user left before the bot was done. */
    abandoned: boolean;
    /** Times the bot did not understand. */
    misunderstandings: number;
    failedTurns: number;
  };
}

export interface SimUser {
  id: string;
  email: string;
  /** Tickets this user filed so far: the program's `tickets_filed`, which names the next ticket. */
  ticketsFiled: number;
}

const menuButtons = [
  { label: 'Track an order', intent: 'track_order' },
  { label: 'Report a problem', intent: 'report_problem' },
  { label: 'Talk to a person', intent: 'talk_to_human' },
] as const;
const anythingElseButtons = ['Yes, something else', 'No, thanks'] as const;

function buttonsOf(stepId: string, labels: readonly string[]) {
  return labels.map((label, i) => ({
    name: label,
    request: { type: buttonRequestType(stepId, i), payload: { label } },
  }));
}

const trackUtterances = [
  'where is my order',
  'where is order {id}?',
  'track order {id}',
  'order status please',
  'has my package shipped? order {id}',
  'I want to track my order',
  'where is my parcel {id}',
];
const problemUtterances = ['I have a problem', 'something is broken', 'report an issue', 'it does not work'];
const humanUtterances = [
  'talk to a person',
  'can I speak to a human',
  'I want a real agent',
  'connect me to support staff',
];
const gibberish = ['hello?', 'do you sell gift cards', 'asdf', 'what are your opening hours', 'ok'];
const problems = {
  normal: [
    'The app shows a blank page',
    'I cannot log in to my account',
    'The size chart on the website is wrong',
    'My discount code is not accepted',
    'The tracking link does not open',
    'I got the wrong colour',
    'The invoice has my old address',
  ],
  urgent: [
    'I was charged twice and want a refund',
    'The blender arrived broken',
    'Still no refund after three weeks',
    'This is urgent, the delivery went to the wrong address',
    'I was charged for an order I cancelled',
  ],
} as const;
const badEmails = ['not sure', 'my email', 'sam at example dot com'];

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** Plays one conversation of `user` starting at `start`. */
export function simulateConversation(rng: Rng, user: SimUser, start: Date): SimConversation {
  let clock = start.getTime();
  const turns: SimTurn[] = [];
  let current: SimTurn | null = null;
  const outcome: SimConversation['outcome'] = {
    orderId: null,
    orderStatus: null,
    ticketId: null,
    priority: null,
    handedOff: false,
    abandoned: false,
    misunderstandings: 0,
    failedTurns: 0,
  };

  // A function, so TypeScript does not narrow `current` to its initial null after the closures set it.
  const currentTurn = (): SimTurn | null => current;
  const emit = (type: string, payload: unknown, stepMs = rng.int(0, 3)) => {
    clock += stepMs;
    current?.traces.push({ type, payload, time: clock });
  };
  const block = (id: string) => emit('block', { blockID: id });
  const path = (p: string) => emit('path', { path: p });
  const text = (message: string) => emit('text', { message });
  const turn = (action: RuntimeAction, thinkMs: number) => {
    if (current) turns.push(current);
    clock += thinkMs;
    const startedAt = new Date(clock);
    clock += rng.int(20, 60);
    current = {
      action,
      interactionType: action.type.startsWith('path-') ? 'button' : action.type,
      startedAt,
      finishedAt: startedAt,
      traces: [],
      intents: [],
      apiCalls: [],
      functionCalls: [],
      success: true,
      ended: false,
    };
    return current;
  };
  const think = () => rng.int(4_000, 45_000);
  const say = (utterance: string) => turn({ type: 'text', payload: utterance }, think());
  const press = (stepId: string, labels: readonly string[], index: number) => {
    const [button] = buttonsOf(stepId, labels).slice(index, index + 1);
    if (!button) throw new Error(`no button ${index} on ${stepId}`);
    return turn(button.request, think());
  };
  const menu = () => {
    block('menu');
    emit('choice', {
      buttons: buttonsOf(
        'menu',
        menuButtons.map((b) => b.label),
      ),
    });
  };
  const anythingElse = () => {
    block('forget_order');
    block('anything_else');
    emit('choice', { buttons: buttonsOf('anything_else', anythingElseButtons) });
  };
  const handoff = (data: { email: string; ticket: string; reason: string }) => {
    emit('flow', { diagramID: 'handoff', name: 'Hand off to a person' });
    block('handoff_step');
    text("I'm connecting you to a person now.");
    emit('live-agent-handoff', { queue: 'support', ...data });
    outcome.handedOff = true;
    if (current) current.ended = true;
  };

  const lookup = (orderId: string) => {
    outcome.orderId = orderId;
    block('lookup');
    const status = rng.weighted([
      ['shipped', 55],
      ['processing', 25],
      ['cancelled', 7],
      ['not found', 11],
      ['no answer', 2],
    ] as const);
    outcome.orderStatus = status;
    const ms = status === 'no answer' ? 5000 : rng.int(40, 400);
    if (status === 'no answer') {
      emit(
        'debug',
        { type: 'api', message: `API GET ${ORDER_API}/orders/${orderId} failed: timed out after 5000 ms` },
        ms,
      );
    } else {
      emit(
        'debug',
        {
          type: 'api',
          message: `API GET ${ORDER_API}/orders/${orderId} answered ${status === 'not found' ? 404 : 200} in ${ms} ms`,
        },
        ms,
      );
    }
    const success = status !== 'not found' && status !== 'no answer';
    current?.apiCalls.push({ stepID: 'lookup', name: 'Order API', success });
    if (!success) {
      path('api:failure');
      block('lookup_failed');
      text(`I couldn't find order ${orderId} (or the order system did not answer).`);
      return anythingElse();
    }
    path('api:success');
    block('status');
    const eta = new Date(clock + rng.int(1, 9) * 86_400_000);
    if (status === 'shipped') {
      path('condition:1');
      block('shipped');
      text(`Order ${orderId} has shipped and should arrive on ${isoDay(eta)}.`);
    } else if (status === 'processing') {
      path('condition:2');
      block('processing');
      text(`Order ${orderId} is being prepared; we expect to ship it by ${isoDay(eta)}.`);
    } else {
      path('condition:else');
      block('other_status');
      text(`Order ${orderId} is ${status}.`);
    }
    anythingElse();
  };

  const orderId = () => String(rng.int(10_000, 99_999));

  const trackOrder = (viaText: boolean) => {
    const id = orderId();
    const utterance = rng.pick(trackUtterances);
    const withId = utterance.includes('{id}');
    if (viaText) {
      const t = say(utterance.replace('{id}', id));
      t.intents.push('track_order');
    } else
      press(
        'menu',
        menuButtons.map((b) => b.label),
        0,
      );
    path('choice:1');
    block('have_order_id');
    if (viaText && withId) {
      path('condition:1');
      return lookup(id);
    }
    path('condition:else');
    block('ask_order');
    text('What is your order number? It has 5 digits.');
    block('capture_order');
    if (rng.chance(0.06)) return abandon();
    if (rng.chance(0.12)) {
      say(rng.pick(['I dont know', 'the blue one', 'its on the email']));
      outcome.misunderstandings++;
      text('Order numbers have 5 digits, like 12345.');
    }
    say(rng.pick([id, `it is ${id}`, `#${id}`, `order ${id}`]));
    path('capture:captured');
    lookup(id);
  };

  const reportProblem = (viaText: boolean) => {
    if (viaText) say(rng.pick(problemUtterances)).intents.push('report_problem');
    else
      press(
        'menu',
        menuButtons.map((b) => b.label),
        1,
      );
    path('choice:2');
    block('ask_email');
    text("Sorry to hear that. What's your e-mail address?");
    block('capture_email');
    if (rng.chance(0.07)) return abandon();
    if (rng.chance(0.15)) {
      say(rng.pick(badEmails));
      outcome.misunderstandings++;
      text("That doesn't look like an e-mail address. Try again?");
    }
    say(rng.chance(0.8) ? user.email : `my email is ${user.email}`);
    path('capture:captured');
    block('ask_problem');
    text('In a few words, what went wrong?');
    block('capture_problem');
    if (rng.chance(0.05)) return abandon();
    const urgent = rng.chance(0.3);
    const problem = rng.pick(urgent ? problems.urgent : problems.normal);
    say(problem);
    path('capture:captured');
    block('triage');
    user.ticketsFiled++;
    const ticket = `T-${1000 + user.ticketsFiled}`;
    outcome.ticketId = ticket;
    outcome.priority = urgent ? 'high' : 'normal';
    emit('debug', { type: 'code', message: `triaged ${ticket} ${urgent ? 'high' : 'normal'}` }, rng.int(2, 15));
    current?.functionCalls.push({ stepID: 'triage', name: 'Ticket triage', success: true });
    if (urgent) {
      path('code:urgent');
      block('urgent');
      text(`Ticket ${ticket} is filed with high priority.`);
      block('urgent_person');
      return handoff({ email: user.email, ticket, reason: problem });
    }
    path('code:default');
    block('filed');
    text(`Thanks! Ticket ${ticket} is filed (normal priority). We'll write to ${user.email}.`);
    anythingElse();
  };

  const talkToHuman = (viaText: boolean) => {
    if (viaText) say(rng.pick(humanUtterances)).intents.push('talk_to_human');
    else {
      press(
        'menu',
        menuButtons.map((b) => b.label),
        2,
      );
      path('choice:3');
      block('to_person');
    }
    handoff({ email: '', ticket: '', reason: '' });
  };

  const abandon = () => {
    outcome.abandoned = true;
  };

  const goodbye = () => {
    press('anything_else', anythingElseButtons, 1);
    path('choice:2');
    block('goodbye');
    text('Goodbye!');
    block('end');
    emit('end', null);
    if (current) current.ended = true;
  };

  // The launch: the welcome and the menu.
  turn({ type: 'launch' }, 0);
  emit('flow', { diagramID: 'main', name: 'Main menu' });
  block('welcome');
  text(rng.pick(["Hi! I'm the support bot.", 'Hello! Support bot here.']));
  menu();

  const topic = rng.weighted([
    ['order tracking', 55],
    ['problem report', 25],
    ['human handoff', 10],
    ['other', 10],
  ] as const);
  if (topic === 'other') {
    say(rng.pick(gibberish));
    outcome.misunderstandings++;
    path('choice:else');
    text('Sorry, I can track orders, take problem reports, or get you a person.');
    emit('choice', {
      buttons: buttonsOf(
        'menu',
        menuButtons.map((b) => b.label),
      ),
    });
    if (rng.chance(0.6)) abandon();
    else trackOrder(false);
  } else if (topic === 'order tracking') trackOrder(rng.chance(0.6));
  else if (topic === 'problem report') reportProblem(rng.chance(0.4));
  else talkToHuman(rng.chance(0.7));

  // Waiting at "anything else?": another round, goodbye, or gone.
  let rounds = 0;
  while (!outcome.abandoned && !outcome.handedOff && currentTurn()?.ended !== true) {
    const next = rng.weighted([
      ['goodbye', 62],
      ['again', rounds === 0 ? 12 : 4],
      ['leave', 26],
    ] as const);
    if (next === 'leave') {
      abandon();
      break;
    }
    if (next === 'goodbye') {
      goodbye();
      break;
    }
    rounds++;
    press('anything_else', anythingElseButtons, 0);
    path('choice:1');
    menu();
    if (rng.chance(0.7)) trackOrder(rng.chance(0.5));
    else reportProblem(false);
  }
  const lastTurn = currentTurn();
  if (lastTurn) turns.push(lastTurn);

  // A rare turn that ran out of time: its traces stop part way and it counts as a failed invocation.
  for (const t of turns) {
    if (t.action.type !== 'launch' && t.traces.length > 2 && rng.chance(0.004)) {
      t.traces = t.traces.slice(0, 1);
      t.apiCalls = [];
      t.functionCalls = [];
      t.success = false;
      outcome.failedTurns++;
    }
    const last = t.traces[t.traces.length - 1];
    t.finishedAt = new Date(Math.max(t.startedAt.getTime(), last?.time ?? t.startedAt.getTime()) + rng.int(1, 20));
  }
  const ended = turns.some((t) => t.ended);
  return { turns, ended, topic, outcome };
}
