/**
 * Streams the application resumes itself (`resumeStream(lastEventId)`, the SDK transport's method): a GET
 * with its `Last-Event-ID` in the current session, decided like every other resume (a `request` stream
 * without a body, as a restored one). What arrives is the application's: a replayed answer or progress of a
 * request this process never sent goes to `onmessage` as the SDK's does, not to the orphan path.
 */
const APP_RESUME_PREFIX = 'resume:';

/** The stream key of the application's n-th `resumeStream`. */
export const appResumeKey = (n: number): string => `${APP_RESUME_PREFIX}${n}`;

/** True for a stream the application resumed (`appResumeKey`). */
export const isAppResumeKey = (key: string): boolean => key.startsWith(APP_RESUME_PREFIX);
