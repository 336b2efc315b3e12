/**
 * Response body of the bare baseline servers when the bench does not pass one (BENCH_BODY):
 * shaped and sized like a Troupe Character. The bench normally passes the real Character JSON
 * it got from Troupe, so the baselines send exactly as many bytes.
 */
export const SAMPLE_CHARACTER_BODY = JSON.stringify({
  id: 'character_01jf8z6r2d3m4n5p6q7r8s9t0v',
  createdAt: '2026-01-01T00:00:00.000Z',
  projectId: 'project_01jf8z6r2d3m4n5p6q7r8s9t0w',
  name: 'Bench',
  description: 'A character created by the HTTP read load test.',
  voiceId: null,
  voiceDescription: null,
  hasAvatar: false,
  capabilityGroupIds: [],
});

/** Content type Troupe uses for JSON replies; the baselines send the same. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The line every bare server prints on stdout once it listens. */
export const BARE_READY_MSG = 'bare listening';
