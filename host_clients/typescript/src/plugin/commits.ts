// Turn commits and their outbox. A commit goes straight to the daemon when nothing waits;
// when the daemon cannot take it (unreachable, storage down, busy, a fault of its own)
// the turn is parked in the outbox and the host still gets "committed". Parked turns are
// sent in commit order: on every new connection, after every successful call, on a retry
// timer (the link's backoff), and before any later commit, which queues behind them. Only
// a definitive refusal of the turn itself sets it aside, with a warning; every other error
// keeps it queued, because the daemon, not the turn, is what failed. While the daemon link
// is down (it has warned once for the outage, naming the outbox) a commit is parked at
// once, without waiting on the link, and without a warning of its own.
import { ErrorCode, RpcError } from "../client/errors.js";
import type { IngestParams, IngestResult } from "../generated/protocol.js";
import type { PluginLogger } from "./host-types.js";
import type { DrainResult, Outbox } from "./outbox.js";

export type SendTurn = (params: IngestParams) => Promise<IngestResult>;

/**
 * The daemon refused the turn itself, and would refuse it again however often it is sent:
 * -32602 (a field of the wrong type) and -32009 (well-typed values it does not accept).
 * Every other answer says something about the daemon or the link (storage down, busy, a
 * model or fault of its own, a method or version it lacks, a cancelled call), and can
 * pass. An oversized turn (-32001) is not refused here: the frame cap is the daemon's
 * setting, not a property of the turn.
 */
export function isDefinitiveRefusal(err: unknown): boolean {
  return err instanceof RpcError && (err.code === ErrorCode.INVALID_PARAMS || err.code === ErrorCode.INVALID_INPUT);
}

function describe(err: unknown): string {
  return err instanceof Error ? (err.message.split("\n")[0] ?? err.name) : String(err);
}

/** What kind of failure: the "still queued" warning is repeated only when this changes. */
function kindOf(err: unknown): string {
  if (err instanceof RpcError) return `rpc ${err.code}`;
  return err instanceof Error ? err.name : "other";
}

export interface RetryDelays {
  initialMs: number;
  maxMs: number;
}

export class TurnCommits {
  private running: Promise<void> | null = null;
  private again = false;
  private commitsDone: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private delayMs: number;
  private mayHavePending: boolean | null = null; // null: not looked yet (turns of an earlier run)
  private queuedKind: string | null = null; // the last "still queued" warning's kind, not repeated
  private closed = false;

  constructor(
    readonly outbox: Outbox,
    private readonly send: SendTurn,
    private readonly log: PluginLogger,
    private readonly retry: RetryDelays,
    /** Whether the daemon link is down and has reported it (DaemonLink.degradedReason). */
    private readonly linkDown: () => boolean = () => false,
  ) {
    this.delayMs = retry.initialMs;
  }

  /** Whether a retry of the outbox is scheduled (false once closed). */
  get retryScheduled(): boolean {
    return this.timer !== null;
  }

  /**
   * Commit one turn: "committed" once the daemon has it or it is on disk in the outbox.
   * Commits run one at a time, so no turn overtakes one committed before it.
   */
  commit(request: IngestParams): Promise<"committed" | "duplicate"> {
    const done = this.commitsDone.then(() => this.commitNow(request));
    this.commitsDone = done.catch(() => undefined);
    return done;
  }

  private async commitNow(request: IngestParams): Promise<"committed" | "duplicate"> {
    if (this.linkDown()) {
      // The turn must not wait on a link that failed: on disk it is committed, and the
      // retry timer (or the next connection) sends it.
      await this.park(request, "the daemon is unavailable");
      return "committed";
    }
    // A drain under way sends older turns: they go first (it never rejects).
    if (this.running) await this.running;
    const waiting = (await this.outbox.pending()).length;
    if (waiting > 0) {
      await this.park(request, `behind ${waiting} earlier turn(s) waiting to be sent`);
      await this.drain();
      return "committed";
    }
    try {
      const out = await this.send(request);
      return out.duplicate ? "duplicate" : "committed";
    } catch (err) {
      if (isDefinitiveRefusal(err)) {
        this.warnSetAside(request, await this.outbox.setAside(request), err);
      } else {
        await this.park(request, describe(err));
      }
      return "committed";
    }
  }

  private async park(request: IngestParams, why: string): Promise<void> {
    await this.outbox.put(request);
    this.mayHavePending = true;
    this.notice(`libravdb: turn of session ${request.sessionId} kept in ${this.outbox.dir} until the daemon takes it (${why})`);
    this.schedule();
  }

  /**
   * Send the queued turns now (never throws: what fails stays queued and is retried). A
   * call while a drain runs joins it, and the drain then looks at the queue once more.
   */
  drain(send: SendTurn = this.send): Promise<void> {
    this.again = true;
    if (!this.running) {
      this.running = this.drainLoop(send).finally(() => {
        this.running = null;
      });
    }
    return this.running;
  }

  /** After a successful daemon call: the daemon answers again, send what waits. */
  kick(): void {
    if (this.closed || this.running || this.mayHavePending === false) return;
    void this.drain();
  }

  /**
   * On a new connection, before any other call goes out on it (`send` uses it directly).
   * When a drain is already running, that drain is what opened the connection: waiting for
   * it here would wait for ourselves.
   */
  async drainOnConnect(send: SendTurn): Promise<void> {
    if (this.running) return;
    await this.drain(send);
  }

  private async drainLoop(send: SendTurn): Promise<void> {
    while (this.again && !this.closed) {
      this.again = false;
      let result: DrainResult;
      try {
        result = await this.outbox.drain(send, isDefinitiveRefusal);
      } catch (err) {
        // The outbox directory itself failed (permissions, disk): the files stay.
        this.stillQueued(err, `the outbox failed: ${describe(err)}`);
        return;
      }
      this.report(result);
      if (result.stopped !== null) return;
    }
  }

  private report(result: DrainResult): void {
    for (const aside of result.setAside) this.warnSetAside(aside.params, aside.path, aside.error);
    for (const path of result.unreadable) this.log.warn(`libravdb: an unreadable outbox file was moved out of the queue: ${path}`);
    if (result.stopped !== null) {
      this.stillQueued(result.stopped, describe(result.stopped));
      return;
    }
    if (result.sent) this.log.info(`libravdb: sent ${result.sent} turn(s) that waited in ${this.outbox.dir}`);
    this.mayHavePending = false;
    this.queuedKind = null;
    this.delayMs = this.retry.initialMs;
  }

  /** A warning, unless the link is down: its one outage warning already says where turns wait. */
  private notice(message: string): void {
    if (this.linkDown()) this.log.debug?.(message);
    else this.log.warn(message);
  }

  private stillQueued(err: unknown, reason: string): void {
    this.mayHavePending = true;
    const delay = this.delayMs;
    if (this.linkDown()) {
      this.log.debug?.(`libravdb: turns still queued in ${this.outbox.dir} (${reason})`);
    } else if (kindOf(err) !== this.queuedKind) {
      this.queuedKind = kindOf(err);
      this.log.warn(`libravdb: turns still queued in ${this.outbox.dir} (${reason}); they are retried in the background, oldest first`);
    }
    this.schedule(delay);
    this.delayMs = Math.min(this.delayMs * 2, this.retry.maxMs);
  }

  private warnSetAside(request: IngestParams, path: string, err: unknown): void {
    const code = err instanceof RpcError ? `code ${err.code}: ${err.rpcMessage.split("\n")[0]}` : describe(err);
    this.log.warn(
      `libravdb: a turn of session ${request.sessionId} was set aside in ${path}, never to be resent: the daemon refused it (${code}). Rename the file to end in .json to queue it again.`,
    );
  }

  /** A retry after `delayMs`, unless one is due already; it never keeps the process alive. */
  private schedule(delayMs: number = this.delayMs): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.drain();
    }, delayMs);
    this.timer.unref();
  }

  /** Stop retrying (the plugin shuts down); what still waits is sent by the next run. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const waiting = await this.outbox.pending().catch(() => []);
    if (waiting.length) this.log.warn(`libravdb: ${waiting.length} turn(s) still queued in ${this.outbox.dir}; they are sent when the plugin next runs`);
  }
}
