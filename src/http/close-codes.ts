/** WebSocket close codes Troupe sends (RFC 6455 section 7.4.1). */
export const CloseCode = {
  normal: 1000,
  /** The server is shutting down: reconnect (to another process). */
  goingAway: 1001,
  /** A message over the size limit. */
  messageTooBig: 1009,
  /** The server could not set the socket up. */
  internalError: 1011,
  /** Events could not be delivered completely (a slow client, a lost link): reconnect later. */
  tryAgainLater: 1013,
} as const;
