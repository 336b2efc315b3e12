import { hostname } from 'node:os';
import type { Logger } from 'pino';
import packageJson from '../package.json' with { type: 'json' };
import { ActorSystem } from '../actors/actor-system.ts';
import { ConversationActors } from '../actors/conversation-actors.ts';
import { ActorEvents, conversationLost } from '../actors/actor-events.ts';
import { roomActorType, type RoomActor } from '../actors/room-actor.ts';
import { RoomActors } from '../actors/room-actors.ts';
import { roomLost } from './rooms/events.ts';
import { Director } from './rooms/director.ts';
import { RoomScene } from './rooms/scene.ts';
import { allHooks, roomActorHooks } from './rooms/hooks.ts';
import { conversationRoomType, type ConversationRoom } from '../actors/conversation-room.ts';
import { gameTransport } from '../actors/game-transport.ts';
import { Invalidations } from './cache/invalidations.ts';
import { CapabilityExecutor } from './capabilities/executor.ts';
import { CapabilityService } from './capabilities/service.ts';
import { CharacterService } from './characters/service.ts';
import type { Config } from './config.ts';
import { ConversationService } from './conversations/service.ts';
import { openDatabase } from './db/database.ts';
import { DocumentProcessor } from './documents/processor.ts';
import { DocumentService } from './documents/service.ts';
import { documentRoutes } from './http/routes/documents.ts';
import { openDocumentIndex } from './retrieval/document-index.ts';
import { Embedder } from './retrieval/embeddings.ts';
import { Knowledge } from './retrieval/knowledge.ts';
import { ParserPool } from '../workers/parser-pool.ts';
import { ChatCompletionService } from './inference/chat.ts';
import { ResponsesService } from './inference/responses/service.ts';
import { InferenceUpstream } from './inference/upstream.ts';
import { createApp } from './http/app.ts';
import { startHttpServer } from './http/engine.ts';
import { buildOpenApi } from './http/openapi.ts';
import { adminRoutes } from './http/routes/admin.ts';
import { capabilityRoutes } from './http/routes/capabilities.ts';
import { characterRoutes } from './http/routes/characters.ts';
import { conversationRoutes } from './http/routes/conversations.ts';
import { performRoutes } from './http/routes/perform.ts';
import { matchmakeRoutes } from './http/routes/matchmake.ts';
import { metaRoutes } from './http/routes/meta.ts';
import { v1Routes } from './http/routes/v1.ts';
import { v1ResponseRoutes } from './http/routes/v1-responses.ts';
import type { Route } from './http/route.ts';
import type { HttpServer } from './http/types.ts';
import { Metrics } from './observability/metrics.ts';
import type { CreatedApiKey } from './projects/service.ts';
import { PerformService } from './perform/service.ts';
import { ProjectService } from './projects/service.ts';
import { RoomService } from './rooms/service.ts';
import { RoomVoiceControl, roomVoiceHooks } from './rooms/voice-control.ts';
import { LiveKitControlPlane } from './livekit/control-plane.ts';
import { LiveKitWebhooks } from './livekit/webhooks.ts';
import { roomRoutes } from './http/routes/rooms.ts';
import { roomLiveRoutes } from './http/routes/room-live.ts';
import { roomVoiceRoutes } from './http/routes/room-voice.ts';
import { studioRoutes } from './http/routes/studio.ts';
import type { Resources } from './resources.ts';

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly engine: HttpServer['engine'];
  readonly resources: Resources;
  /** Set when this start created the project's first key; show it once, never log it. */
  readonly initialKey: CreatedApiKey | null;
  /** Graceful: stop accepting, drain in-flight requests, close the database. */
  stop(): Promise<void>;
}

/** DOCX archives may unpack to this much; more is refused before anything is inflated. */
const DOCX_MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024;
const DOCX_MAX_ENTRIES = 10_000;
/** Text kept from one document (about 5M tokens): beyond it a document is cut, not failed. */
const MAX_DOCUMENT_TEXT_CHARS = 20_000_000;

/** The longest a reply may take, every round and capability wait included. */
function replyTimeoutMs(config: Config): number {
  const { inference, capabilities } = config;
  const perRound = inference.totalTimeoutMs + Math.max(capabilities.resultTimeoutMs, capabilities.webhookTimeoutMs);
  return perRound * (capabilities.maxRounds + 1) + 30_000;
}

/** Builds every resource from the config, applies migrations and starts listening. */
export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    acquireTimeoutMs: config.databaseAcquireTimeoutMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    logger,
  });
  const invalidations = new Invalidations(database);
  await invalidations.start();
  const cacheOptions = { db: database.db, invalidations, cacheMaxEntries: config.cacheMaxEntries };
  const characters = new CharacterService(cacheOptions);
  const capabilities = new CapabilityService(cacheOptions);
  const projects = new ProjectService(cacheOptions);
  const upstream = new InferenceUpstream(config.inference, logger);
  const executor = new CapabilityExecutor({ config: config.capabilities, projects, logger });
  const embedder = new Embedder(config.embeddings, logger);
  const documentIndex = await openDocumentIndex({
    db: database.db,
    ownConnection: database.ownConnection,
    logger,
    dimensions: config.embeddings.dimensions,
    embeddings: embedder.configured,
    vacuumTermSets: database.kind === 'pglite',
  });
  if (!documentIndex.vectors) {
    logger.warn(
      embedder.configured
        ? 'document retrieval is full-text only: the database has no pgvector (see the README to install it)'
        : 'document retrieval is full-text only: set EMBEDDINGS_MODEL (and EMBEDDINGS_BASE_URL if not the inference server) for vector search',
    );
  }
  const knowledge = new Knowledge({
    db: database.db,
    index: documentIndex,
    embedder,
    invalidations,
    logger,
    cacheMaxEntries: config.cacheMaxEntries,
    options: { topK: config.documents.retrievalTopK, tokenBudget: config.documents.retrievalTokens },
  });
  const parserPool = new ParserPool({
    maxThreads: config.documents.concurrency,
    maxMemoryMb: config.documents.parseMemoryMb,
    timeoutMs: config.documents.parseTimeoutMs,
    limits: {
      maxPages: config.documents.maxPages,
      maxPixels: config.documents.maxPixels,
      maxUncompressedBytes: DOCX_MAX_UNCOMPRESSED_BYTES,
      maxZipEntries: DOCX_MAX_ENTRIES,
      maxTextChars: MAX_DOCUMENT_TEXT_CHARS,
    },
  });
  const documentProcessor = new DocumentProcessor({
    database,
    invalidations,
    pool: parserPool,
    embedder,
    index: documentIndex,
    logger,
    options: {
      concurrency: config.documents.concurrency,
      leaseMs: config.documents.leaseMs,
      pollMs: config.documents.pollMs,
      maxAttempts: config.documents.maxAttempts,
      chunking: { maxTokens: config.documents.chunkTokens, overlapTokens: config.documents.chunkOverlapTokens },
    },
  });
  const turnDeps = { model: upstream, executor, knowledge, maxRounds: config.capabilities.maxRounds };
  const conversations = new ConversationService({
    db: database.db,
    characters,
    capabilities,
    historyTokens: config.conversationHistoryTokens,
    ...turnDeps,
  });
  const system = await ActorSystem.acquire({ redisUrl: config.redisUrl, logger, redisCommandTimeoutMs: config.redisCommandTimeoutMs, failoverMs: config.actorFailoverMs });
  const events = new ActorEvents(system.presence, conversationLost, {
    processId: system.processId,
    healthy: (processId) => system.healthy(processId),
    checkIntervalMs: Math.max(250, Math.floor(config.actorFailoverMs / 3)),
  });
  system.onPresenceLost(() => events.lost((conversationId) => system.isLocal(conversationId)));
  const advertised: { address?: string } = {};
  const liveRooms = new Set<ConversationRoom>();
  const roomName = system.define(
    'conversation',
    conversationRoomType({
      conversations,
      gateway: () => conversationActors,
      projects,
      events,
      logger,
      idleMs: config.conversationIdleMs,
      publicAddress: () => advertised.address,
      live: liveRooms,
    }),
  );
  const conversationActors = new ConversationActors({ system, roomName, conversations, events, replyTimeoutMs: replyTimeoutMs(config) });
  const roomEvents = new ActorEvents(system.presence, roomLost, {
    processId: system.processId,
    channelPrefix: 'troupe:room:',
    healthy: (processId) => system.healthy(processId),
    checkIntervalMs: Math.max(250, Math.floor(config.actorFailoverMs / 3)),
  });
  system.onPresenceLost(() => roomEvents.lost((roomId) => system.isLocal(roomId)));
  if (!upstream.configured) logger.warn('no inference backend configured: set INFERENCE_BASE_URL and INFERENCE_MODEL for characters to answer');
  const chat = new ChatCompletionService({ upstream, characters, capabilities, knowledge });
  // Voice: without LIVEKIT_* the rooms still work as text scenes; token/start answer 503.
  const rooms: RoomService = new RoomService({ db: database.db, characters, conversations, hooks: allHooks(roomVoiceHooks(() => roomVoice), roomActorHooks(() => roomActors)) });
  const roomVoice = new RoomVoiceControl({
    rooms,
    characters: (projectId, characterId) => characters.get(projectId, characterId),
    livekit: new LiveKitControlPlane({ config: config.livekit }),
    webhooks: new LiveKitWebhooks({ config: config.livekit }),
    logger,
    hooks: {
      onStarted: (room) => roomActors.changed(room.projectId, room.id, { kind: 'started' }),
      onHuman: (roomId, human) => {
        roomActors.announce(roomId, { type: 'participant', change: human.change, kind: 'human', characterId: null, identity: human.identity, name: human.name });
        return Promise.resolve();
      },
    },
  });
  const scene = new RoomScene({
    ...turnDeps,
    rooms,
    characters,
    capabilities,
    conversations,
    director: new Director({ model: upstream, logger }),
    maxAgentTurns: config.roomMaxAgentTurns,
    logger,
  });
  const liveRoomActors = new Set<RoomActor>();
  const roomActorName = system.define(
    'room',
    roomActorType({
      rooms,
      characters,
      scene,
      projects,
      events: roomEvents,
      gateway: () => roomActors,
      logger,
      idleMs: config.conversationIdleMs,
      publicAddress: () => advertised.address,
      live: liveRoomActors,
    }),
  );
  const roomActors = new RoomActors({ system, roomName: roomActorName, rooms, events: roomEvents });
  const resources: Resources = {
    config,
    logger,
    database,
    invalidations,
    metrics: new Metrics(),
    projects,
    characters,
    capabilities,
    chat,
    responses: new ResponsesService({ db: database.db, chat }),
    documents: new DocumentService({ database, characters, index: documentIndex, invalidations, cancel: (id) => documentProcessor.cancel(id) }),
    documentProcessor,
    conversations,
    conversationActors,
    perform: new PerformService({ characters, capabilities, ...turnDeps }),
    rooms,
    roomActors,
    roomVoice,
    lifecycle: { draining: false },
  };
  const apiRoutes = [
    ...characterRoutes,
    ...capabilityRoutes,
    ...conversationRoutes,
    ...performRoutes,
    ...documentRoutes,
    ...v1Routes,
    ...roomRoutes,
    ...roomVoiceRoutes,
    ...roomLiveRoutes,
    ...v1ResponseRoutes,
    ...matchmakeRoutes,
    ...adminRoutes,
  ];
  let openapi: Record<string, unknown> | null = null;
  const routes: Route[] = [...metaRoutes(() => (openapi ??= buildOpenApi(routes, packageJson.version))), ...apiRoutes];
  // The studio's pages are served beside the API but are not part of its description.
  const { handler, upgrade } = createApp(resources, [...routes, ...studioRoutes()]);

  await documentProcessor.start();
  let game: Awaited<ReturnType<typeof gameTransport>> | null = null;
  let http: HttpServer;
  try {
    http = await startHttpServer(
      config.httpEngine,
      {
        host: config.host,
        port: config.port,
        handler,
        upgrade,
        webSocketPaths: routes.filter((route) => route.websocket).map((route) => route.path),
        colocate: async (engine) => (game = await gameTransport(engine)),
        onAdapterError: (err) => logger.error({ err }, 'http adapter failed'),
      },
      logger,
    );
  } catch (err) {
    await documentProcessor.stop();
    await parserPool.close();
    await system.release();
    await invalidations.stop();
    await database.close();
    throw err;
  }
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  // Only needed when game clients may matchmake on one process and play on another.
  advertised.address = config.publicAddress ?? (config.redisUrl ? `${config.host === '0.0.0.0' || config.host === '::' ? hostname() : host}:${http.port}` : undefined);

  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      resources.lifecycle.draining = true;
      // Game clients get Colyseus' shutdown close code; replies under way still finish.
      await Promise.all([...liveRooms, ...liveRoomActors].map((room) => room.close()));
      await http.close(config.shutdownGraceMs);
      game?.shutdown();
      await system.release();
      await documentProcessor.stop();
      await parserPool.close();
      await invalidations.stop();
      await database.close();
      upstream.close();
      logger.info('troupe stopped');
    })();
    return stopping;
  };

  // The first key is made only once the port is ours: a start that fails before this point
  // leaves no key that nobody saw, and the caller shows the key right after this returns.
  let initial: Awaited<ReturnType<ProjectService['ensureInitialKey']>>;
  try {
    initial = await resources.projects.ensureInitialKey(config.bootstrapKey);
  } catch (err) {
    await stop();
    throw err;
  }
  if (initial.revokedBootstrap) {
    logger.warn('TROUPE_BOOTSTRAP_KEY was revoked through the admin API and stays revoked; remove it or set a new one');
  }
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${http.port}`,
    port: http.port,
    engine: http.engine,
    resources,
    initialKey: initial.created,
    stop,
  };
}
