import type { Logger } from 'pino';
import type { CapabilityConfig } from '../config.ts';
import type { CapabilityType, RecordedCapabilityCall } from '../db/schema.ts';
import type { ProjectService } from '../projects/service.ts';
import { checkArguments } from './arguments.ts';
import type { Capability } from './schemas.ts';
import { deliverWebhook } from './webhook.ts';

/** A capability call as the game client receives it. */
export interface CapabilityCallEvent {
  callId: string;
  name: string;
  type: CapabilityType;
  params: Record<string, unknown>;
}

export type ClientResult = { received: true; result: unknown } | { received: false };

/** How client_function_* calls reach the game client on one surface. */
export interface ClientChannel {
  /** WebSocket `capability` event, or collected for the HTTP reply / perform actions. */
  deliver(call: CapabilityCallEvent): void;
  /**
   * Surfaces with a live client (the WebSocket) wait for a client_function_call's result; the
   * others return the call to their caller instead.
   */
  awaitResult?(callId: string, timeoutMs: number, signal: AbortSignal): Promise<ClientResult>;
}

export interface CallContext {
  projectId: string;
  characterId: string;
  conversationId: string | null;
  capabilities: readonly Capability[];
  channel: ClientChannel;
  signal: AbortSignal;
}

/** What the model hears back, or that generation stops because the caller takes the call. */
export type CallOutcome =
  | { kind: 'continue'; toolResult: unknown; recorded: RecordedCapabilityCall | null }
  | { kind: 'stop'; recorded: RecordedCapabilityCall };

/**
 * The one capability model of every surface. Arguments are checked against the parameter
 * definitions before anything is delivered or called; then by type:
 * - client_function_fire: delivered to the client, generation goes on;
 * - client_function_call: delivered; a live client's result is awaited (with a timeout that
 *   continues without it and says so), other surfaces return it to their caller;
 * - server_function_fire: POSTed to the webhook without waiting;
 * - server_function_call: POSTed, and the JSON it answers goes back to the model.
 */
export class CapabilityExecutor {
  readonly #config: CapabilityConfig;
  readonly #projects: ProjectService;
  readonly #logger: Logger;

  constructor(options: { config: CapabilityConfig; projects: ProjectService; logger: Logger }) {
    this.#config = options.config;
    this.#projects = options.projects;
    this.#logger = options.logger;
  }

  async execute(call: { id: string; name: string; arguments: string }, ctx: CallContext): Promise<CallOutcome> {
    const capability = ctx.capabilities.find((c) => c.name === call.name);
    if (!capability) {
      return { kind: 'continue', toolResult: { error: `There is no capability named '${call.name}'.` }, recorded: null };
    }
    const checked = checkArguments(capability.parameters, call.arguments);
    if (!checked.ok) {
      return { kind: 'continue', toolResult: { error: `The call was not made: ${checked.problem}.` }, recorded: null };
    }
    const event: CapabilityCallEvent = { callId: call.id, name: capability.name, type: capability.type, params: checked.params };
    const recorded: RecordedCapabilityCall = { callId: call.id, name: capability.name, type: capability.type, params: checked.params };

    switch (capability.type) {
      case 'client_function_fire':
        ctx.channel.deliver(event);
        return { kind: 'continue', toolResult: { status: 'delivered to the game client' }, recorded };
      case 'client_function_call': {
        ctx.channel.deliver(event);
        if (!ctx.channel.awaitResult) return { kind: 'stop', recorded };
        const answer = await ctx.channel.awaitResult(call.id, this.#config.resultTimeoutMs, ctx.signal);
        if (!answer.received) {
          const toolResult = { error: `The game client did not answer within ${this.#config.resultTimeoutMs} ms; continue without the result.` };
          return { kind: 'continue', toolResult, recorded: { ...recorded, result: toolResult } };
        }
        return { kind: 'continue', toolResult: answer.result, recorded: { ...recorded, result: answer.result } };
      }
      case 'server_function_fire': {
        const delivery = this.#deliver(capability, event, ctx);
        delivery.catch((err: unknown) => {
          this.#logger.warn({ err, capability: capability.name, callId: call.id }, 'capability webhook (fire) failed');
        });
        return { kind: 'continue', toolResult: { status: 'sent' }, recorded };
      }
      case 'server_function_call': {
        try {
          const result = (await this.#deliver(capability, event, ctx)) ?? null;
          return { kind: 'continue', toolResult: result, recorded: { ...recorded, result } };
        } catch (err) {
          this.#logger.warn({ err, capability: capability.name, callId: call.id }, 'capability webhook (call) failed');
          const toolResult = { error: `The call failed: ${(err as Error).message}.` };
          return { kind: 'continue', toolResult, recorded: { ...recorded, result: toolResult } };
        }
      }
    }
  }

  async #deliver(capability: Capability, event: CapabilityCallEvent, ctx: CallContext): Promise<unknown> {
    const secret = await this.#projects.webhookSecret(ctx.projectId);
    return deliverWebhook({
      url: capability.webhookUrl ?? '',
      secret,
      timeoutMs: this.#config.webhookTimeoutMs,
      allowPrivate: this.#config.webhookAllowPrivate,
      // A fire must not be cut off because the reply that caused it finished first.
      ...(capability.type === 'server_function_call' ? { signal: ctx.signal } : {}),
      body: {
        type: 'capability_call',
        callId: event.callId,
        projectId: ctx.projectId,
        characterId: ctx.characterId,
        conversationId: ctx.conversationId,
        capability: { id: capability.id, name: capability.name, type: capability.type },
        arguments: event.params,
        sentAt: new Date().toISOString(),
      },
    });
  }
}
