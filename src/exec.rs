//! The one subprocess runner: every program saphan starts (git, the suite,
//! go, docker, ssh) goes through [`run`].
//!
//! Each child runs in its own process group. On timeout the whole group gets
//! SIGTERM, then SIGKILL after [`GRACE`], while stdout and stderr keep being
//! drained (a grandchild that holds a pipe open cannot hang the caller: the
//! drain itself is bounded after the kill). If the future running a child is
//! dropped (Ctrl-C, a `select!` that lost), the group is killed as well.
//!
//! Once the child is reaped and its group killed, both pipes get one shared
//! [`DRAIN_BOUND`] to reach end-of-file; a process that escaped the group
//! (`setsid`) and still holds a pipe is then left behind, not waited for.
//! Captured stderr keeps only its last [`STDERR_TAIL`] bytes.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What kept an attempt's processes from outliving it (record field
/// `containment`, host class: docs/dispatch.md, "Containment").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Containment {
    /// Its own cgroup (cgroup v2, `saphan-<owner pid>-<nonce>` under the
    /// hierarchy's root), killed whole with `cgroup.kill` when the suite
    /// ends: everything it started ends — daemons included — and the
    /// suite's process ids are the machine's own.
    Cgroup,
    /// Its process group only (no writable cgroup v2 hierarchy for this
    /// user there): a process that leaves the group and drops the scratch
    /// marker (`setsid`, `env -i`) can outlive the attempt.
    ProcessGroup,
}

impl Containment {
    /// The record's word (`cgroup`, `process-group`).
    pub fn as_str(self) -> &'static str {
        match self {
            Containment::Cgroup => "cgroup",
            Containment::ProcessGroup => "process-group",
        }
    }
    /// Read the record's word.
    pub fn parse(s: &str) -> Option<Containment> {
        match s {
            "cgroup" => Some(Containment::Cgroup),
            "process-group" => Some(Containment::ProcessGroup),
            _ => None,
        }
    }
}

/// The environment variable every process saphan starts for a stable
/// scratch path carries: `SAPHAN_SCRATCH=<the scratch tree's path>` (the
/// suite, and the `git worktree` calls that create and remove the tree).
/// [`run`] gives a command carrying it a cgroup of its own where one can
/// be made. A process still carrying it when the next attempt starts is a
/// leftover of an earlier attempt (saphan was killed) and is killed before
/// the tree is made again — see `crate::worktree::add_at`.
pub const SCRATCH_MARKER: &str = "SAPHAN_SCRATCH";

/// How long a timed-out group has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long the pipes may stay open once the child is reaped and its group
/// is dead (both pipes together).
pub const DRAIN_BOUND: Duration = Duration::from_secs(1);

/// How much of a child's stderr is kept: the last 1 MiB.
pub const STDERR_TAIL: usize = 1024 * 1024;

/// How much captured stdout ([`Sink::Capture`]) a local command may write:
/// 64 MiB, read whole. Past it the command's stdout is refused, not cut
/// ([`WholeBuf`], [`Termination::OutputLost`]): this bounds what a command
/// can make saphan hold in memory, and stdout that may be larger goes to a
/// [`Sink::File`].
pub const STDOUT_WHOLE: usize = 64 * 1024 * 1024;

/// How much captured stdout a remote command may write: 16 MiB, read whole
/// or refused as [`STDOUT_WHOLE`] is. Lower because a remote machine's
/// login shell may print before saphan's own command; a script that frames
/// its output is read through [`Sink::CaptureFrom`] and holds none of that
/// noise (issue 13.5: a probe against a host that floods 300 MB stays under
/// 64 MiB). Remote commands whose output is large stream it to a file.
pub const REMOTE_STDOUT_WHOLE: usize = 16 * 1024 * 1024;

/// A boxed async reader, as [`Input::open`] hands it out.
pub type BoxReader = std::pin::Pin<Box<dyn AsyncRead + Send>>;

/// A byte stream fed to a child's stdin, taken once (see [`Input::Stream`]).
/// Cloning a [`Cmd`] shares the stream: whichever clone runs first takes it.
#[derive(Clone)]
pub struct SharedReader(std::sync::Arc<std::sync::Mutex<Option<BoxReader>>>);

impl SharedReader {
    /// Wrap a reader.
    pub fn new(r: impl AsyncRead + Send + 'static) -> SharedReader {
        SharedReader(std::sync::Arc::new(std::sync::Mutex::new(Some(Box::pin(
            r,
        )))))
    }
    /// Take the reader (`None` once taken).
    pub fn take(&self) -> Option<BoxReader> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

impl std::fmt::Debug for SharedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedReader")
    }
}

/// What a child reads on stdin. Every variant is streamed (never read whole
/// into memory by the runner) and closed at its end.
#[derive(Debug, Clone, Default)]
pub enum Input {
    /// `/dev/null` locally; closed at once remotely.
    #[default]
    Null,
    /// These bytes.
    Bytes(Vec<u8>),
    /// The bytes of this local file (a git bundle of many MB goes this way).
    File(PathBuf),
    /// Whatever this reader yields.
    Stream(SharedReader),
}

impl Input {
    /// Open the input as one async reader; `Ok(None)` for [`Input::Null`]
    /// (or a stream already taken).
    ///
    /// Errors: the local file cannot be opened.
    pub async fn open(&self) -> std::io::Result<Option<BoxReader>> {
        Ok(match self {
            Input::Null => None,
            Input::Bytes(b) => Some(Box::pin(std::io::Cursor::new(b.clone()))),
            Input::File(p) => Some(Box::pin(tokio::fs::File::open(p).await?)),
            Input::Stream(s) => s.take(),
        })
    }
}

/// git's repository-local environment variables: what
/// `git rev-parse --local-env-vars` prints (git 2.47), plus
/// `GIT_INTERNAL_SUPER_PREFIX` (older gits) and `GIT_QUARANTINE_PATH`
/// (set with the object variables in a `pre-receive` hook). A git hook runs
/// with some of them set (`GIT_DIR`, `GIT_INDEX_FILE`, …); a child that
/// inherited them would act on the hook's repository and index instead of
/// the one saphan names. [`run`] removes every one of them from every child
/// (git itself and the suite alike); a variable a [`Cmd`] sets explicitly
/// with [`Cmd::env`] still applies. That is how saphan's own git gets
/// `GIT_NO_REPLACE_OBJECTS`, `GIT_GRAFT_FILE` and `GIT_CONFIG_COUNT` back
/// (`crate::git::harden`): they are listed here so that a value inherited
/// from a hook's environment never reaches a suite, not so that git runs
/// without them — the suite's own git sees replace refs as git would.
pub const GIT_LOCAL_ENV: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_QUARANTINE_PATH",
];

/// Where a child's stdout goes.
#[derive(Debug, Clone)]
pub enum Sink {
    /// Collected into [`Output::stdout`].
    Capture,
    /// Collected into [`Output::stdout`] from the first occurrence of these
    /// bytes on, the bytes included; nothing before them is held (what a
    /// login shell prints before a script's own begin line, however much).
    /// Empty when they never came.
    CaptureFrom(Vec<u8>),
    /// Streamed into this file (created or truncated); [`Output::stdout`] stays empty.
    File(PathBuf),
    /// Discarded.
    Null,
}

/// Sees a child's stderr as it is read, chunk by chunk, before
/// [`Output::stderr`] keeps its tail: for a caller that must act on a line
/// while the child still runs (a supervised run on a machine prints its
/// process group there, which a dropped run kills). Cloning a [`Cmd`]
/// shares it.
#[derive(Clone)]
pub struct StderrWatch(std::sync::Arc<std::sync::Mutex<WatchFn>>);

/// What a [`StderrWatch`] calls.
type WatchFn = dyn FnMut(&[u8]) + Send;

impl StderrWatch {
    /// Call `f` with every chunk of stderr, in order.
    pub fn new(f: impl FnMut(&[u8]) + Send + 'static) -> StderrWatch {
        StderrWatch(std::sync::Arc::new(std::sync::Mutex::new(f)))
    }
    fn feed(&self, bytes: &[u8]) {
        if let Ok(mut f) = self.0.lock() {
            f(bytes);
        }
    }
}

impl std::fmt::Debug for StderrWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StderrWatch")
    }
}

/// One program invocation.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, Option<OsString>)>,
    timeout: Option<Duration>,
    stdout: Sink,
    stdin: Input,
    stderr_watch: Option<StderrWatch>,
}

impl Cmd {
    /// A command for `program`, no arguments, inherited environment, no timeout.
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            timeout: None,
            stdout: Sink::Capture,
            stdin: Input::Null,
            stderr_watch: None,
        }
    }
    /// `argv[0]` then the rest, as given.
    pub fn from_argv<S: AsRef<OsStr>>(argv: &[S]) -> Cmd {
        let mut c = Cmd::new(argv[0].as_ref());
        c.args = argv[1..].iter().map(|a| a.as_ref().to_owned()).collect();
        c
    }
    /// Append one argument.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Cmd {
        self.args.push(a.as_ref().to_owned());
        self
    }
    /// Append arguments.
    pub fn args<I, S>(mut self, it: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(it.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }
    /// Working directory.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }
    /// Set an environment variable for the child.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Cmd {
        self.env
            .push((k.as_ref().to_owned(), Some(v.as_ref().to_owned())));
        self
    }
    /// Remove an environment variable for the child.
    pub fn env_remove(mut self, k: impl AsRef<OsStr>) -> Cmd {
        self.env.push((k.as_ref().to_owned(), None));
        self
    }
    /// Apply environment changes in order: `Some(v)` sets, `None` removes
    /// (the shape [`Cmd::env_changes`] reads back).
    pub fn env_changes_from<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        changes: &[(K, Option<V>)],
    ) -> Cmd {
        for (k, v) in changes {
            self.env.push((
                k.as_ref().to_owned(),
                v.as_ref().map(|v| v.as_ref().to_owned()),
            ));
        }
        self
    }
    /// Wall-clock budget; past it the process group is killed.
    pub fn timeout(mut self, d: Duration) -> Cmd {
        self.timeout = Some(d);
        self
    }
    /// Where stdout goes (default: captured).
    pub fn stdout(mut self, s: Sink) -> Cmd {
        self.stdout = s;
        self
    }
    /// Bytes written to the child's stdin, then closed (default: /dev/null).
    pub fn stdin(mut self, bytes: Vec<u8>) -> Cmd {
        self.stdin = Input::Bytes(bytes);
        self
    }
    /// What the child reads on stdin (default: nothing, [`Input::Null`]).
    pub fn input(mut self, input: Input) -> Cmd {
        self.stdin = input;
        self
    }
    /// Have `watch` see the child's stderr as it is read ([`StderrWatch`]).
    pub fn watch_stderr(mut self, watch: StderrWatch) -> Cmd {
        self.stderr_watch = Some(watch);
        self
    }
    /// The program, as given.
    pub fn program(&self) -> &OsStr {
        &self.program
    }
    /// The arguments after the program.
    pub fn argv_tail(&self) -> &[OsString] {
        &self.args
    }
    /// The working directory, if set.
    pub fn working_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }
    /// Environment changes in order: `Some(v)` sets, `None` removes.
    pub fn env_changes(&self) -> &[(OsString, Option<OsString>)] {
        &self.env
    }
    /// The budget, if set.
    pub fn budget(&self) -> Option<Duration> {
        self.timeout
    }
    /// Where stdout goes.
    pub fn sink(&self) -> &Sink {
        &self.stdout
    }
    /// What stdin reads.
    pub fn stdin_input(&self) -> &Input {
        &self.stdin
    }
    /// A shell-like rendering for messages (not for execution).
    pub fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(self.args.iter())
            .map(|a| shown_arg(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One argument as [`Cmd::display`] shows it: quoted for a POSIX shell
/// ([`crate::quote::quote`]), except a script's text (an argument
/// holding a newline, as `sh -c` takes one of `src/remote/`) by its name —
/// `<script saphan-heal>` from its `# saphan-heal — …` header, else
/// `<script of N lines>` — so a failure's one line quotes the command, not
/// a hundred lines of shell.
fn shown_arg(a: &str) -> String {
    if !a.contains('\n') {
        // Quoted for a POSIX shell, so the line can be run by hand as is.
        return crate::quote::quote(a).unwrap_or_else(|| a.to_string());
    }
    let named = a
        .strip_prefix("# ")
        .and_then(|r| r.split_whitespace().next())
        .filter(|n| n.starts_with("saphan"));
    match named {
        Some(n) => format!("<script {n}>"),
        None => format!("<script of {} lines>", a.lines().count()),
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// Exited on its own with this code.
    Exited(i32),
    /// Killed by this signal, not by us.
    Signaled(i32),
    /// Ran past its budget; its process group was killed.
    TimedOut,
    /// Ended, but its stdout could not be kept whole — it wrote more than
    /// saphan reads ([`STDOUT_WHOLE`], [`REMOTE_STDOUT_WHOLE`]), or its
    /// file could not be written (a local run; from a machine that is the
    /// transport's `copy` refusal) — so none of it is handed on
    /// ([`Output::stdout`] is empty) and its stderr holds an
    /// [`output_lost_line`] saying why (last locally, first from a
    /// machine). Never a success, whatever it exited with.
    OutputLost,
}

impl Termination {
    /// True for `Exited(0)`.
    pub fn success(&self) -> bool {
        matches!(self, Termination::Exited(0))
    }
    /// The exit code when it exited on its own.
    pub fn code(&self) -> Option<i32> {
        match self {
            Termination::Exited(c) => Some(*c),
            _ => None,
        }
    }
    /// How a program ended, read from a status a parent reported in its
    /// place — a POSIX shell's `$?`, bwrap's monitor: 129..=192 is
    /// "killed by signal status−128" (neither can tell that from a program
    /// that exited so), anything else an exit with that code.
    pub fn of_reported_status(status: i32) -> Termination {
        if status > 128 && status < 128 + 65 {
            Termination::Signaled(status - 128)
        } else {
            Termination::Exited(status)
        }
    }
}

/// What a finished child left.
#[derive(Debug, Clone)]
pub struct Output {
    /// How it ended.
    pub status: Termination,
    /// Captured stdout ([`Sink::Capture`], [`Sink::CaptureFrom`]), whole:
    /// at most [`STDOUT_WHOLE`] bytes ([`REMOTE_STDOUT_WHOLE`] from a
    /// machine), and nothing when more came ([`Termination::OutputLost`], or
    /// [`Termination::TimedOut`] for a run that also ran past its budget).
    pub stdout: Vec<u8>,
    /// Captured stderr, always — only its last [`STDERR_TAIL`] bytes (1 MiB):
    /// a tail buffer, so a suite that floods stderr cannot exhaust memory.
    pub stderr: Vec<u8>,
    /// Wall time from spawn to reaped (not including the pipe drain).
    pub elapsed: Duration,
}

impl Output {
    /// Why its stdout was lost — the `why` of its [`output_lost_line`],
    /// without the line's own remedy, for a caller that gives its own —;
    /// `None` unless it ended [`Termination::OutputLost`].
    pub fn lost_why(&self) -> Option<String> {
        if self.status != Termination::OutputLost {
            return None;
        }
        let text = self.stderr_str();
        let why = text.lines().find_map(|l| {
            let rest = l.strip_prefix(OUTPUT_LOST)?;
            Some(rest.strip_suffix(OUTPUT_LOST_REST).unwrap_or(rest))
        });
        Some(why.unwrap_or("its stdout was not read whole").to_string())
    }
    /// stdout as UTF-8 (lossy), trimmed at the end.
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end().to_string()
    }
    /// stderr as UTF-8 (lossy), trimmed at the end.
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim_end().to_string()
    }
}

/// A buffer that keeps only the last `cap` bytes of what is pushed into it:
/// a ring, so dropping the oldest bytes moves nothing. For what is shown,
/// never parsed: a child's stderr. stdout, which callers read as data, goes
/// through a [`WholeBuf`] or a file.
///
/// Its memory is bounded by `cap` and reached in few steps: it doubles up
/// to `TAIL_GROW`, then takes its whole cap in one reservation (pages
/// the kernel hands out only as they are written). A flood therefore costs
/// one `cap`-sized region — never a cascade of doubled copies that the
/// allocator may keep resident after each move (issue 13.5's 64 MiB peak
/// under 300 MB of login-shell noise).
#[derive(Debug, Clone)]
pub struct TailBuf {
    cap: usize,
    buf: std::collections::VecDeque<u8>,
}

/// Up to this many bytes a [`TailBuf`] or [`WholeBuf`] grows by doubling;
/// past it, it reserves its whole cap at once (1 MiB).
const TAIL_GROW: usize = 1024 * 1024;

/// The capacity to reserve for `need` bytes in a buffer of capacity `have`
/// bounded by `cap`: doubling up to [`TAIL_GROW`], then the whole cap.
fn grown(have: usize, need: usize, cap: usize) -> usize {
    if need > TAIL_GROW {
        cap
    } else {
        (have * 2).clamp(need, cap)
    }
}

impl TailBuf {
    /// An empty buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> TailBuf {
        TailBuf {
            cap,
            buf: std::collections::VecDeque::new(),
        }
    }
    /// Append bytes, dropping the oldest beyond the cap first.
    pub fn push(&mut self, bytes: &[u8]) {
        let bytes = if bytes.len() >= self.cap {
            self.buf.clear();
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        let need = self.buf.len() + bytes.len();
        if need > self.buf.capacity() {
            let want = grown(self.buf.capacity(), need, self.cap);
            self.buf.reserve_exact(want - self.buf.len());
        }
        self.buf.extend(bytes);
    }
    /// The last `cap` bytes, in order (the ring is made contiguous in place).
    pub fn finish(self) -> Vec<u8> {
        Vec::from(self.buf)
    }
}

/// A captured stdout: kept whole up to `cap` bytes, or not at all.
///
/// What a command prints on stdout is data — a listing, a report, a
/// script's answer — and a part of it read as the whole is how a listing
/// silently loses its first entries. So past `cap` the buffer lets go of
/// everything and remembers only that it overflowed; [`run`] then reports
/// the command as [`Termination::OutputLost`]. Memory stays bounded by `cap`
/// (grown as a [`TailBuf`] grows).
///
/// With a marker ([`WholeBuf::from_marker`]) nothing counts until the marker
/// has come: what a login shell prints before saphan's script is not the
/// script's output, and is dropped as it streams (issue 13.5).
#[derive(Debug, Clone)]
pub struct WholeBuf {
    cap: usize,
    buf: Vec<u8>,
    /// While `Some`, nothing is kept but the bytes that may begin it.
    marker: Option<Vec<u8>>,
    overflowed: bool,
}

impl WholeBuf {
    /// An empty buffer keeping up to `cap` bytes.
    pub fn new(cap: usize) -> WholeBuf {
        WholeBuf {
            cap,
            buf: Vec::new(),
            marker: None,
            overflowed: false,
        }
    }
    /// An empty buffer that keeps nothing until `marker` has been pushed
    /// (across any split of the pushes), then up to `cap` bytes from the
    /// marker's first byte on. An empty marker is there at once.
    pub fn from_marker(cap: usize, marker: Vec<u8>) -> WholeBuf {
        WholeBuf {
            marker: (!marker.is_empty()).then_some(marker),
            ..WholeBuf::new(cap)
        }
    }
    /// Append bytes; past the cap, drop everything and remember it.
    pub fn push(&mut self, bytes: &[u8]) {
        if let Some(m) = &self.marker {
            // Held: fewer bytes than the marker, the end of what came so
            // far that may be its beginning.
            let mut seen = std::mem::take(&mut self.buf);
            seen.extend_from_slice(bytes);
            match memchr::memmem::find(&seen, m) {
                Some(at) => {
                    self.marker = None;
                    self.keep(&seen[at..]);
                }
                None => {
                    let held = seen.len().min(m.len() - 1);
                    seen.drain(..seen.len() - held);
                    self.buf = seen;
                }
            }
            return;
        }
        self.keep(bytes);
    }
    fn keep(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        let need = self.buf.len() + bytes.len();
        if need > self.cap {
            self.overflowed = true;
            self.buf = Vec::new();
            return;
        }
        if need > self.buf.capacity() {
            let want = grown(self.buf.capacity(), need, self.cap);
            self.buf.reserve_exact(want - self.buf.len());
        }
        self.buf.extend_from_slice(bytes);
    }
    /// Whether more than `cap` bytes came (after the marker).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }
    /// The `why` of an [`output_lost_line`] when it overflowed.
    pub fn overflow_why(&self) -> Option<String> {
        self.overflowed.then(|| {
            format!(
                "the command wrote more than {} MiB on stdout",
                self.cap / (1024 * 1024)
            )
        })
    }
    /// Everything kept: nothing when it overflowed, or when a marker was
    /// awaited and never came.
    pub fn finish(self) -> Vec<u8> {
        if self.marker.is_some() || self.overflowed {
            return Vec::new();
        }
        self.buf
    }
}

/// How the line [`output_lost_line`] begins, and how it goes on after its
/// `why`.
const OUTPUT_LOST: &str = "saphan: output-lost: ";
const OUTPUT_LOST_REST: &str = "; saphan reads a command's output whole or not at all, and used none of it — run the command by hand to see what it prints";

/// The line, newline included, that [`run`] (last) and the SSH transport
/// (first: the watchdog reads its end markers from the end) add to a
/// command's stderr when its stdout was lost ([`Termination::OutputLost`]),
/// so every message that quotes the stderr names why:
/// `saphan: output-lost: <why>; … — <what to do>`. [`Output::lost_why`]
/// reads it back.
pub fn output_lost_line(why: &str) -> String {
    format!("{OUTPUT_LOST}{why}{OUTPUT_LOST_REST}\n")
}

/// Kills the process group when dropped unless disarmed.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(p) = self.pgid {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(p), sig);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
    }
}

/// What a drain keeps of its stream: stdout whole ([`WholeBuf`]), or the
/// tail of stderr ([`TailBuf`]).
enum Keep {
    Whole(WholeBuf),
    Tail(TailBuf),
}

/// What a drain read: the bytes kept, and why the stream is not whole when
/// it is not (an `output-lost` why: overflow, a read or write that failed).
#[derive(Default)]
struct Drained {
    bytes: Vec<u8>,
    lost: Option<String>,
}

/// Read `r` to end-of-file or until `stop` flips, into `file` or `keep`.
/// After the loop the file is flushed (not bounded by `stop`: that is local
/// disk, not a pipe someone else holds). A stdout that could not be read
/// or written whole says why in [`Drained::lost`]; a stderr tail never does.
async fn drain<R: AsyncRead + Unpin>(
    mut r: R,
    mut file: Option<(tokio::fs::File, PathBuf)>,
    mut keep: Keep,
    mut stop: tokio::sync::watch::Receiver<bool>,
    watch: Option<StderrWatch>,
) -> Drained {
    let mut buf = vec![0u8; 64 * 1024];
    let mut lost = None;
    loop {
        let n = tokio::select! {
            biased;
            _ = stop.changed() => break,
            res = r.read(&mut buf) => match res {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    lost = Some(format!("reading its stdout failed: {e}"));
                    break;
                }
            },
        };
        if let Some(w) = &watch {
            w.feed(&buf[..n]);
        }
        match (&mut file, &mut keep) {
            (Some((f, path)), _) => {
                if let Err(e) = f.write_all(&buf[..n]).await {
                    lost = Some(format!(
                        "writing its stdout to {} failed: {e}",
                        path.display()
                    ));
                    break;
                }
            }
            (None, Keep::Whole(w)) => w.push(&buf[..n]),
            (None, Keep::Tail(t)) => t.push(&buf[..n]),
        }
    }
    // Flushed, not synced: the file is read back by this process (the page
    // cache serves it), and the attempt's durable evidence is the kept log
    // and the record, written later.
    if let Some((mut f, path)) = file
        && let Err(e) = f.flush().await
    {
        lost.get_or_insert(format!(
            "writing its stdout to {} failed: {e}",
            path.display()
        ));
    }
    match keep {
        Keep::Whole(w) => {
            lost = lost.or_else(|| w.overflow_why());
            Drained {
                bytes: w.finish(),
                lost,
            }
        }
        // stderr: only shown, so a failed read leaves what came.
        Keep::Tail(t) => Drained {
            bytes: t.finish(),
            lost: None,
        },
    }
}

/// Wait for both drain tasks together; if the pipes are still open
/// [`DRAIN_BOUND`] after the group died (something outside the group
/// inherited them), tell the drains to stop and take what they had read by
/// then (what the group wrote, and whatever the escaped process wrote
/// within that bound).
async fn collect(
    out_task: Option<tokio::task::JoinHandle<Drained>>,
    err_task: Option<tokio::task::JoinHandle<Drained>>,
    stop: tokio::sync::watch::Sender<bool>,
) -> (Drained, Drained) {
    let joined = async {
        let o = match out_task {
            Some(t) => t.await.unwrap_or_else(|e| Drained {
                bytes: Vec::new(),
                lost: Some(format!("reading its stdout failed: {e}")),
            }),
            None => Drained::default(),
        };
        let e = match err_task {
            Some(t) => t.await.unwrap_or_default(),
            None => Drained::default(),
        };
        (o, e)
    };
    tokio::pin!(joined);
    tokio::select! {
        r = &mut joined => r,
        _ = tokio::time::sleep(DRAIN_BOUND) => {
            tracing::debug!("pipes still open after the group died; a process escaped it");
            let _ = stop.send(true);
            joined.await
        }
    }
}

/// Run `cmd` to completion (or to its budget).
///
/// Errors: only when the program cannot be started (not found, not
/// executable) or a stdout file cannot be created; everything after spawn is
/// reported in [`Output::status`].
pub async fn run(cmd: Cmd) -> std::io::Result<Output> {
    // An attempt's command gets its own cgroup where one can be made
    // (docs/dispatch.md, "Containment"): started straight into it
    // (`clone3(CLONE_INTO_CGROUP)`), or, where the kernel refuses that,
    // joining it before exec.
    let cgroup = if cmd
        .env
        .iter()
        .any(|(k, v)| k == SCRATCH_MARKER && v.is_some())
    {
        let g = AttemptCgroup::new();
        if g.is_none() {
            UNCONTAINED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        g
    } else {
        None
    };
    let input = cmd.stdin.open().await?;
    let file = match &cmd.stdout {
        Sink::File(p) => Some((tokio::fs::File::create(p).await?, p.clone())),
        _ => None,
    };
    let started = Instant::now();
    let (mut child, stdin, stdout, stderr) = spawn(&cmd, cgroup.as_ref(), input.is_some())?;
    let mut guard = GroupGuard {
        pgid: child.id().map(|p| p as i32),
    };
    tracing::debug!(cmd = %cmd.display(), pgid = ?guard.pgid, "spawned");
    // A second signal force-kills every registered group before exiting.
    let _registered = guard.pgid.map(crate::cancel::register_local);

    if let (Some(mut input), Some(mut stdin)) = (input, stdin) {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut input, &mut stdin).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stdout_buf = match &cmd.stdout {
        Sink::CaptureFrom(m) => WholeBuf::from_marker(STDOUT_WHOLE, m.clone()),
        _ => WholeBuf::new(STDOUT_WHOLE),
    };
    let out_task = stdout.map(|s| {
        tokio::spawn(drain(
            s,
            file,
            Keep::Whole(stdout_buf),
            stop_rx.clone(),
            None,
        ))
    });
    let err_task = stderr.map(|s| {
        tokio::spawn(drain(
            s,
            None,
            Keep::Tail(TailBuf::new(STDERR_TAIL)),
            stop_rx,
            cmd.stderr_watch.clone(),
        ))
    });

    let waited = match cmd.timeout {
        Some(t) => tokio::time::timeout(t, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    let status = match waited {
        Some(res) => {
            let st = res?;
            use std::os::unix::process::ExitStatusExt;
            match (st.code(), st.signal()) {
                (Some(c), _) => Termination::Exited(c),
                (None, Some(s)) => Termination::Signaled(s),
                (None, None) => Termination::Signaled(0),
            }
        }
        None => {
            tracing::debug!(cmd = %cmd.display(), "budget exceeded; terminating process group");
            guard.signal(nix::sys::signal::Signal::SIGTERM);
            if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
                guard.signal(nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait().await;
            }
            Termination::TimedOut
        }
    };
    let elapsed = started.elapsed();
    // The leader is gone; whatever is left of its group goes too, so a
    // grandchild cannot keep our pipes open.
    guard.signal(nix::sys::signal::Signal::SIGKILL);
    guard.pgid = None;
    if let Some(g) = cgroup {
        g.finish().await;
    }

    let (stdout, mut stderr) = collect(out_task, err_task, stop_tx).await;
    let status = match stdout.lost {
        // A timed-out run says so; its output was never going to be whole.
        Some(why) if status != Termination::TimedOut => {
            tracing::debug!(cmd = %cmd.display(), why, "stdout lost");
            if stderr.bytes.last().is_some_and(|b| *b != b'\n') {
                stderr.bytes.push(b'\n');
            }
            stderr
                .bytes
                .extend_from_slice(output_lost_line(&why).as_bytes());
            Termination::OutputLost
        }
        _ => status,
    };
    Ok(Output {
        status,
        stdout: stdout.bytes,
        stderr: stderr.bytes,
        elapsed,
    })
}

/// A boxed async writer: a child's stdin.
type BoxWriter = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// A started child: tokio's, or one started straight into its cgroup.
enum Child {
    Tokio(tokio::process::Child),
    #[cfg(target_os = "linux")]
    Into(into_cgroup::Child),
}

impl Child {
    fn id(&self) -> Option<u32> {
        match self {
            Child::Tokio(c) => c.id(),
            #[cfg(target_os = "linux")]
            Child::Into(c) => Some(c.pid() as u32),
        }
    }
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Child::Tokio(c) => c.wait().await,
            #[cfg(target_os = "linux")]
            Child::Into(c) => c.wait().await,
        }
    }
}

type Spawned = (
    Child,
    Option<BoxWriter>,
    Option<BoxReader>,
    Option<BoxReader>,
);

/// A child's whole environment, for both ways of starting it: this
/// process's, without git's repository-local variables
/// ([`GIT_LOCAL_ENV`]), with `cmd`'s changes applied in order.
fn child_env(cmd: &Cmd) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<_> = std::env::vars_os()
        .filter(|(k, _)| !GIT_LOCAL_ENV.iter().any(|g| k == g))
        .collect();
    for (k, v) in &cmd.env {
        env.retain(|(e, _)| e != k);
        if let Some(v) = v {
            env.push((k.clone(), v.clone()));
        }
    }
    env
}

/// Start `cmd` in its own process group, without git's repository-local
/// variables; in `cgroup` when given — created there by
/// `clone3(CLONE_INTO_CGROUP)` (no migration: moving a running process
/// into a cgroup waits for an RCU grace period, ~6 ms a spawn on a loaded
/// machine), else, where the kernel refuses `clone3` (before Linux 5.7, a
/// seccomp filter), by joining it between fork and exec.
fn spawn(cmd: &Cmd, cgroup: Option<&AttemptCgroup>, piped_stdin: bool) -> std::io::Result<Spawned> {
    #[cfg(target_os = "linux")]
    if let Some(fd) = cgroup.and_then(|g| g.fd.as_ref())
        && into_cgroup::SUPPORTED.load(std::sync::atomic::Ordering::Relaxed)
    {
        let null_out = matches!(cmd.stdout, Sink::Null);
        match into_cgroup::spawn(cmd, fd, piped_stdin, null_out) {
            Ok(Some((child, stdin, stdout, stderr))) => {
                let stdin = match stdin {
                    Some(fd) => {
                        Some(Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)
                            as BoxWriter)
                    }
                    None => None,
                };
                let read = |fd: std::os::fd::OwnedFd| -> std::io::Result<BoxReader> {
                    Ok(Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(
                        fd,
                    )?))
                };
                let stdout = stdout.map(read).transpose()?;
                return Ok((Child::Into(child), stdin, stdout, Some(read(stderr)?)));
            }
            Ok(None) => {
                into_cgroup::SUPPORTED.store(false, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    let env = child_env(cmd);
    // The program's path on the child's PATH, found here: with a path std
    // starts the child with posix_spawn (a vfork, no copy of this process's
    // page tables); with a bare name and a changed PATH it must fork.
    let mut c = match spawn_path(&cmd.program, &env) {
        Some(path) => {
            let mut c = tokio::process::Command::new(path);
            c.arg0(&cmd.program);
            c
        }
        None => tokio::process::Command::new(&cmd.program),
    };
    if let Some(g) = cgroup {
        let procs = g.procs.clone();
        // SAFETY: between fork and exec only async-signal-safe calls: open,
        // write, close on a path prepared before the fork.
        unsafe {
            c.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    let _ = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
                Ok(())
            });
        }
    }
    c.args(&cmd.args);
    if let Some(d) = &cmd.cwd {
        c.current_dir(d);
    }
    c.env_clear().envs(env);
    c.process_group(0);
    c.stdin(if piped_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    c.stdout(match cmd.stdout {
        Sink::Null => Stdio::null(),
        _ => Stdio::piped(),
    });
    c.stderr(Stdio::piped());
    c.kill_on_drop(true);
    let mut child = c.spawn()?;
    let stdin = child.stdin.take().map(|s| Box::pin(s) as BoxWriter);
    let stdout = child.stdout.take().map(|s| Box::pin(s) as BoxReader);
    let stderr = child.stderr.take().map(|s| Box::pin(s) as BoxReader);
    Ok((Child::Tokio(child), stdin, stdout, stderr))
}

/// Where a PATH search in the child would find `program`: the first of
/// its [`candidates`] that is an executable regular file, for a bare name.
/// `None` — leave the search to the child's `execvp` — for a name holding a
/// `/`, when nothing is found, or when a candidate before the find is
/// relative (an empty or relative `PATH` entry: the child's working
/// directory, which may differ from this one).
fn spawn_path(program: &OsStr, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    for c in candidates(program, env) {
        let c = Path::new(OsStr::from_bytes(&c));
        if !c.is_absolute() {
            return None;
        }
        if is_executable(c) {
            return Some(c.to_path_buf());
        }
    }
    None
}

/// Where `execvp` would look for `program`: itself when it holds a
/// `/`, else each `PATH` directory of the child's environment (glibc's
/// default `/bin:/usr/bin` when unset; an empty entry is the working
/// directory).
fn candidates(program: &OsStr, env: &[(OsString, OsString)]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let p = program.as_bytes();
    if p.contains(&b'/') || p.is_empty() {
        return vec![p.to_vec()];
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_bytes().to_vec())
        .unwrap_or_else(|| b"/bin:/usr/bin".to_vec());
    path.split(|b| *b == b':')
        .map(|d| {
            let mut c = if d.is_empty() { Vec::new() } else { d.to_vec() };
            if !c.is_empty() && !c.ends_with(b"/") {
                c.push(b'/');
            }
            c.extend_from_slice(p);
            c
        })
        .collect()
}

/// Starting a child straight into a cgroup: `clone3` with
/// `CLONE_INTO_CGROUP | CLONE_PIDFD` (Linux 5.7), then, in the child, only
/// async-signal-safe calls (the signal mask and `SIGPIPE` reset, `setpgid`,
/// `dup2`, `chdir`, `execve` over the candidates a `PATH` search gives)
/// on memory prepared before the clone, as std's own spawn does. An exec
/// failure's errno comes back through a close-on-exec pipe. The exit is
/// awaited on the pidfd.
#[cfg(target_os = "linux")]
mod into_cgroup {
    use super::Cmd;
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::os::unix::process::ExitStatusExt;

    /// False once the kernel refused `clone3` into a cgroup here (then the
    /// child joins its cgroup between fork and exec).
    pub static SUPPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    /// `struct clone_args` (linux/sched.h, `CLONE_ARGS_SIZE_VER2`).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_PIDFD: u64 = 0x1000;
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

    /// A child started by [`spawn`]: killed and reaped when dropped unwaited.
    pub struct Child {
        pid: libc::pid_t,
        pidfd: tokio::io::unix::AsyncFd<OwnedFd>,
        status: Option<std::process::ExitStatus>,
    }

    impl Child {
        pub fn pid(&self) -> libc::pid_t {
            self.pid
        }

        /// Wait for the exit (the pidfd turns readable), then reap.
        pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
            if let Some(s) = self.status {
                return Ok(s);
            }
            loop {
                let mut ready = self.pidfd.readable().await?;
                let mut st = 0;
                // SAFETY: waitpid on our own child, no memory shared.
                let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
                if r == self.pid {
                    let s = std::process::ExitStatus::from_raw(st);
                    self.status = Some(s);
                    return Ok(s);
                }
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                    continue;
                }
                ready.clear_ready();
            }
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            if self.status.is_some() {
                return;
            }
            let pid = self.pid;
            // SAFETY: signalling and reaping our own unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            std::thread::spawn(move || unsafe {
                let mut st = 0;
                libc::waitpid(pid, &mut st, 0);
            });
        }
    }

    fn cstr(b: &[u8]) -> std::io::Result<CString> {
        CString::new(b).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "nul byte in a program, argument, environment or directory",
            )
        })
    }

    fn cvt(r: libc::c_int) -> std::io::Result<libc::c_int> {
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    /// A close-on-exec pipe (read end, write end), both at fd 3 or above
    /// (so the child's `dup2` onto 0–2 never overwrites one it still needs).
    fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
        let mut f = [0; 2];
        // SAFETY: pipe2 fills two fds we then own.
        cvt(unsafe { libc::pipe2(f.as_mut_ptr(), libc::O_CLOEXEC) })?;
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(f[0]), OwnedFd::from_raw_fd(f[1])) };
        Ok((high(r)?, high(w)?))
    }

    fn high(fd: OwnedFd) -> std::io::Result<OwnedFd> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd);
        }
        // SAFETY: duplicating an fd we own.
        let d = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) })?;
        Ok(unsafe { OwnedFd::from_raw_fd(d) })
    }

    fn dev_null() -> std::io::Result<OwnedFd> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        high(f.into())
    }

    type Pipes = (Child, Option<OwnedFd>, Option<OwnedFd>, OwnedFd);

    /// Start `cmd` in the cgroup open at `cgroup`, in its own process group.
    /// `Ok(None)`: this kernel (or a seccomp filter) refuses `clone3` into
    /// a cgroup — nothing was started.
    ///
    /// Errors: the program cannot be executed (its errno, as std reports
    /// it), a nul byte in an argument, pipes or the pidfd cannot be made.
    pub fn spawn(
        cmd: &Cmd,
        cgroup: &OwnedFd,
        piped_stdin: bool,
        null_stdout: bool,
    ) -> std::io::Result<Option<Pipes>> {
        let env = super::child_env(cmd);
        let progs: Vec<CString> = super::candidates(&cmd.program, &env)
            .iter()
            .map(|c| cstr(c))
            .collect::<std::io::Result<_>>()?;
        let mut argv: Vec<CString> = vec![cstr(cmd.program.as_bytes())?];
        for a in &cmd.args {
            argv.push(cstr(a.as_bytes())?);
        }
        let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_p.push(std::ptr::null());
        // A file without `#!` runs under `/bin/sh`, as `execvp` does; slot
        // 1 is set to the candidate in the child.
        let sh = c"/bin/sh";
        let mut sh_p: Vec<*const libc::c_char> = vec![sh.as_ptr(), std::ptr::null()];
        sh_p.extend(argv_p.iter().skip(1));
        let envs: Vec<CString> = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.clone().into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstr(&kv)
            })
            .collect::<std::io::Result<_>>()?;
        let mut env_p: Vec<*const libc::c_char> = envs.iter().map(|e| e.as_ptr()).collect();
        env_p.push(std::ptr::null());
        let cwd = match &cmd.cwd {
            Some(d) => Some(cstr(d.as_os_str().as_bytes())?),
            None => None,
        };
        let (in_r, in_w) = if piped_stdin {
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            (dev_null()?, None)
        };
        let (out_r, out_w) = if null_stdout {
            (None, dev_null()?)
        } else {
            let (r, w) = pipe()?;
            (Some(r), w)
        };
        let (err_r, err_w) = pipe()?;
        let (fail_r, fail_w) = pipe()?;
        let child_fds = [in_r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
        let fail_fd = fail_w.as_raw_fd();

        let mut pidfd: RawFd = -1;
        let args = CloneArgs {
            flags: CLONE_PIDFD | CLONE_INTO_CGROUP,
            pidfd: &mut pidfd as *mut RawFd as u64,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: cgroup.as_raw_fd() as u64,
            ..Default::default()
        };
        // SAFETY: clone3 without CLONE_VM is a fork: the child gets a copy
        // of this thread alone and runs only `exec_child` below, which makes
        // async-signal-safe calls on memory prepared above and never
        // returns.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid == 0 {
            unsafe {
                exec_child(
                    &progs,
                    argv_p.as_ptr(),
                    sh_p.as_mut_ptr(),
                    env_p.as_ptr(),
                    cwd.as_ref(),
                    child_fds,
                    fail_fd,
                )
            }
        }
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM | libc::EINVAL | libc::E2BIG) => {
                    tracing::debug!(error = %e, "clone3 into a cgroup refused; joining before exec");
                    Ok(None)
                }
                _ => Err(e),
            };
        }
        let pid = pid as libc::pid_t;
        // SAFETY: the kernel wrote a new pidfd we now own.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        drop((in_r, out_w, err_w, fail_w));
        let mut errno = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reading into a local buffer.
            let n = unsafe {
                libc::read(
                    fail_r.as_raw_fd(),
                    errno[got..].as_mut_ptr().cast(),
                    4 - got,
                )
            };
            if n == 0 {
                break;
            }
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            got += n as usize;
        }
        if got == 4 {
            let mut st = 0;
            // SAFETY: reaping the child that failed to exec.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            return Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        // SAFETY: the pidfd is an OwnedFd the AsyncFd owns for its life.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
        };
        let pidfd = match registered {
            Ok(fd) => fd,
            Err(e) => {
                let e = std::io::Error::other(e.to_string());
                let mut st = 0;
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut st, 0);
                }
                return Err(e);
            }
        };
        Ok(Some((
            Child {
                pid,
                pidfd,
                status: None,
            },
            in_w,
            out_r,
            err_r,
        )))
    }

    /// The child's side: never returns. Only async-signal-safe calls.
    unsafe fn exec_child(
        progs: &[CString],
        argv: *const *const libc::c_char,
        sh_argv: *mut *const libc::c_char,
        envp: *const *const libc::c_char,
        cwd: Option<&CString>,
        fds: [RawFd; 3],
        fail: RawFd,
    ) -> ! {
        unsafe {
            let fail_with = |e: libc::c_int| -> ! {
                let b = e.to_ne_bytes();
                libc::write(fail, b.as_ptr().cast(), 4);
                libc::_exit(127)
            };
            let errno = || *libc::__errno_location();
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if libc::setpgid(0, 0) != 0 {
                fail_with(errno());
            }
            for (target, fd) in fds.iter().enumerate() {
                if libc::dup2(*fd, target as libc::c_int) < 0 {
                    fail_with(errno());
                }
            }
            if let Some(d) = cwd
                && libc::chdir(d.as_ptr()) != 0
            {
                fail_with(errno());
            }
            let mut err = libc::ENOENT;
            let mut denied = false;
            for p in progs {
                libc::execve(p.as_ptr(), argv, envp);
                match errno() {
                    libc::ENOEXEC => {
                        *sh_argv.add(1) = p.as_ptr();
                        libc::execve(c"/bin/sh".as_ptr(), sh_argv, envp);
                        fail_with(errno());
                    }
                    libc::EACCES => denied = true,
                    libc::ENOENT
                    | libc::ENOTDIR
                    | libc::ESTALE
                    | libc::ENODEV
                    | libc::ETIMEDOUT => {}
                    e => {
                        err = e;
                        break;
                    }
                }
            }
            fail_with(if denied && err == libc::ENOENT {
                libc::EACCES
            } else {
                err
            })
        }
    }
}

/// Set once a command carrying the scratch marker ran here without a
/// cgroup of its own ([`uncontained_ran`]).
static UNCONTAINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True once this process ran a command carrying the scratch marker
/// ([`SCRATCH_MARKER`]) without a cgroup of its own (none could
/// be made): what it started may have left its process group and still
/// run, so an attempt's end is not known to be clean
/// ([`crate::worktree::Scratch::remove`] keeps the attempt marker).
pub fn uncontained_ran() -> bool {
    UNCONTAINED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The cgroup v2 root saphan can make attempt cgroups under on this machine
/// (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid layout),
/// tried once per process: a probe cgroup is created (it must offer
/// `cgroup.kill`) and removed. `None`: not Linux, no cgroup v2, or not
/// writable for this user.
fn cgroup_root() -> Option<&'static Path> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        for r in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let r = Path::new(r);
            if !r.join("cgroup.controllers").exists() {
                continue;
            }
            let probe = r.join(format!("saphan-{}-probe", std::process::id()));
            let ok = std::fs::create_dir(&probe).is_ok();
            let kill = ok && probe.join("cgroup.kill").exists();
            if ok {
                let _ = std::fs::remove_dir(&probe);
            }
            return kill.then(|| r.to_path_buf());
        }
        None
    })
    .as_deref()
}

/// The containment an attempt's commands get on this machine
/// ([`Containment`]): their own cgroup where
/// `cgroup_root` found a writable cgroup v2 hierarchy, their process
/// group otherwise.
pub fn local_containment() -> Containment {
    match cgroup_root() {
        Some(_) => Containment::Cgroup,
        None => Containment::ProcessGroup,
    }
}

/// One attempt command's cgroup, `saphan-<this pid>-<n>` under
/// [`cgroup_root`] (the owner pid lets `kill-leftovers.sh` reap it once
/// this process is gone).
struct AttemptCgroup {
    dir: PathBuf,
    procs: std::ffi::CString,
    /// The directory, open: what `clone3(CLONE_INTO_CGROUP)` starts a
    /// child in (`None` where it cannot be opened; the child then joins).
    fd: Option<std::os::fd::OwnedFd>,
}

impl AttemptCgroup {
    fn new() -> Option<AttemptCgroup> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let root = cgroup_root()?;
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.join(format!("saphan-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let procs = std::ffi::CString::new(std::os::unix::ffi::OsStringExt::into_vec(
            dir.join("cgroup.procs").into_os_string(),
        ))
        .ok()?;
        let fd = std::fs::File::open(&dir)
            .ok()
            .map(std::os::fd::OwnedFd::from);
        Some(AttemptCgroup { dir, procs, fd })
    }

    /// Kill everything still in it and remove it: waits (at most 5 s) for
    /// the kernel to say it is empty. Usually it already is (the leader
    /// was reaped and its group killed): then one read of `cgroup.events`
    /// and the removal, in one hop off the runtime.
    async fn finish(mut self) {
        // Taken, so Drop (for a run dropped before its end) does nothing.
        let dir = std::mem::take(&mut self.dir);
        let d = dir.clone();
        let removed = tokio::task::spawn_blocking(move || {
            cgroup_empty(&d) && std::fs::remove_dir(&d).is_ok()
        })
        .await
        .unwrap_or(false);
        if removed {
            return;
        }
        let _ = tokio::fs::write(dir.join("cgroup.kill"), "1").await;
        for _ in 0..250 {
            let d = dir.clone();
            if tokio::task::spawn_blocking(move || cgroup_empty(&d))
                .await
                .unwrap_or(true)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = tokio::fs::remove_dir(&dir).await;
    }
}

/// Whether the cgroup at `dir` holds no process (`populated 0` in its
/// `cgroup.events`, cgroup v2); a file that cannot be read counts as empty
/// (the group is gone).
fn cgroup_empty(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|ev| ev.is_empty() || ev.lines().any(|l| l == "populated 0"))
        .unwrap_or(true)
}

impl Drop for AttemptCgroup {
    fn drop(&mut self) {
        if self.dir.as_os_str().is_empty() {
            return;
        }
        // A run dropped before its end (Ctrl-C, a lost select!): kill it
        // whole now; the directory goes when empty (or to the next reap).
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// When starting a program failed because file descriptors ran out, what
/// ran out and what to do, in words for a refusal (`EMFILE`: this
/// process's limit; `ENFILE`: the system's); `None` for any other error.
/// A spawn needs descriptors for its pipes, so an exhausted table says
/// nothing about whether the program is installed.
pub fn out_of_descriptors(e: &std::io::Error) -> Option<&'static str> {
    match e.raw_os_error() {
        Some(libc::EMFILE) => Some(
            "saphan ran out of file descriptors (EMFILE: its open-files limit) — raise the limit (`ulimit -n`) or close what holds descriptors, then re-run",
        ),
        Some(libc::ENFILE) => Some(
            "the system ran out of file descriptors (ENFILE: its open-files table is full) — find what holds them (`lsof`), or raise fs.file-max, then re-run",
        ),
        _ => None,
    }
}

/// Resolve a program name the way `execvp` would: a name containing `/` is
/// taken as a path; otherwise the first executable match on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// A regular file with an execute bit (what a PATH search takes).
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {

    #[test]
    fn tail_buf_keeps_the_last_bytes_and_never_doubles() {
        let cap = 3 * 1024 * 1024;
        let mut t = TailBuf::new(cap);
        let mut all = Vec::new();
        for i in 0..200u32 {
            let chunk: Vec<u8> = (0..40_000u32).map(|j| ((i * 7 + j) % 251) as u8).collect();
            t.push(&chunk);
            all.extend_from_slice(&chunk);
            assert!(
                t.buf.capacity() <= cap + 64,
                "capacity {} past the cap",
                t.buf.capacity()
            );
        }
        t.push(&[1, 2, 3]);
        all.extend_from_slice(&[1, 2, 3]);
        assert_eq!(t.finish(), all[all.len() - cap..]);
        let mut t = TailBuf::new(4);
        t.push(b"abcdefgh");
        t.push(b"ij");
        assert_eq!(t.finish(), b"ghij");
    }

    #[test]
    fn a_marked_capture_keeps_from_the_first_marker_wherever_the_pushes_split() {
        let noise = b"x\n@@begin".repeat(50);
        let text = [&noise[..], b"\n@@begin N\nbody\n@@begin N\nend\n"].concat();
        let want = b"\n@@begin N\nbody\n@@begin N\nend\n";
        for size in 1..=text.len() {
            let mut t = WholeBuf::from_marker(1024, b"\n@@begin N\n".to_vec());
            for chunk in text.chunks(size) {
                t.push(chunk);
                assert!(t.buf.len() <= 1024);
            }
            assert!(!t.overflowed());
            assert_eq!(t.finish(), want, "pushes of {size} bytes");
        }
        // Never seen: nothing, however much came, and no overflow.
        let mut t = WholeBuf::from_marker(8, b"MARK".to_vec());
        t.push(&b"MAR".repeat(1000));
        assert!(t.buf.len() < 4);
        assert!(!t.overflowed());
        assert_eq!(t.finish(), b"");
        // After the marker the cap counts: at it, whole; past it, nothing.
        let mut t = WholeBuf::from_marker(6, b"M".to_vec());
        t.push(b"aaMbcdef");
        assert_eq!(t.finish(), b"Mbcdef");
        let mut t = WholeBuf::from_marker(6, b"M".to_vec());
        t.push(b"aaMbcdefg");
        assert!(t.overflowed());
        assert_eq!(t.finish(), b"");
    }

    #[test]
    fn a_capture_is_whole_or_nothing_wherever_the_pushes_split() {
        let text: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for size in [1, 7, 64, 4999, 5000] {
            let mut at_cap = WholeBuf::new(text.len());
            let mut past = WholeBuf::new(text.len() - 1);
            for chunk in text.chunks(size) {
                at_cap.push(chunk);
                past.push(chunk);
            }
            assert!(!at_cap.overflowed());
            assert_eq!(at_cap.finish(), text, "pushes of {size} bytes");
            assert!(past.overflowed(), "pushes of {size} bytes");
            assert!(past.buf.capacity() == 0, "its bytes were let go");
            assert_eq!(past.finish(), b"", "never a part of it");
        }
    }

    /// A local command whose stdout passes [`STDOUT_WHOLE`] is refused by
    /// name ([`Termination::OutputLost`], an `output-lost` line on stderr,
    /// no stdout at all) — however it exited — and one at the cap is whole.
    #[tokio::test]
    async fn a_stdout_past_the_cap_is_refused_whole_and_one_at_it_is_read() {
        let past = run(Cmd::new("sh").args([
            "-c",
            &format!("head -c {} /dev/zero; echo its-own >&2", STDOUT_WHOLE + 1),
        ]))
        .await
        .unwrap();
        assert_eq!(past.status, Termination::OutputLost);
        assert!(!past.status.success());
        assert!(
            past.stdout.is_empty(),
            "{} bytes handed on",
            past.stdout.len()
        );
        let err = past.stderr_str();
        assert!(err.starts_with("its-own\n"), "{err}");
        assert!(
            err.contains("saphan: output-lost: the command wrote more than 64 MiB on stdout"),
            "{err}"
        );
        let at = run(Cmd::new("head").args(["-c", &STDOUT_WHOLE.to_string(), "/dev/zero"]))
            .await
            .unwrap();
        assert_eq!(at.status, Termination::Exited(0));
        assert_eq!(at.stdout.len(), STDOUT_WHOLE);
    }

    /// A stdout file that cannot be written (a full disk: /dev/full) is a
    /// lost output, never a short file read as the whole.
    #[tokio::test]
    async fn a_stdout_file_that_cannot_be_written_is_refused() {
        let out = run(Cmd::new("echo")
            .arg("a report")
            .stdout(Sink::File("/dev/full".into())))
        .await
        .unwrap();
        assert_eq!(out.status, Termination::OutputLost);
        let err = out.stderr_str();
        assert!(
            err.contains("saphan: output-lost: writing its stdout to /dev/full failed"),
            "{err}"
        );
    }

    use super::*;

    #[test]
    fn a_script_argument_is_shown_by_its_name_and_the_rest_quoted() {
        let c = Cmd::new("sh").args([
            "-c",
            "# saphan-heal — heal\nexit 0\n",
            "saphan-heal",
            "line one\nline two",
            "/r",
        ]);
        assert_eq!(
            c.display(),
            "sh -c <script saphan-heal> saphan-heal <script of 2 lines> /r"
        );
        let c = Cmd::new("git").args(["update-ref", "-m", "saphan: put back", "it's"]);
        assert_eq!(
            c.display(),
            "git update-ref -m 'saphan: put back' 'it'\\''s'",
            "quoted, to be run by hand as shown"
        );
    }

    #[tokio::test]
    async fn captures_and_exits() {
        let o = run(Cmd::new("sh").args(["-c", "echo hi; echo err >&2; exit 3"]))
            .await
            .unwrap();
        assert_eq!(o.status, Termination::Exited(3));
        assert_eq!(o.stdout_str(), "hi");
        assert_eq!(o.stderr_str(), "err");
    }

    #[tokio::test]
    async fn timeout_kills_group_even_with_grandchild_holding_stdout() {
        let t0 = Instant::now();
        let o = run(Cmd::new("sh")
            .args(["-c", "sleep 300 & echo started; wait"])
            .timeout(Duration::from_millis(300)))
        .await
        .unwrap();
        assert_eq!(o.status, Termination::TimedOut);
        assert_eq!(o.stdout_str(), "started");
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn a_stderr_flood_keeps_only_the_last_mebibyte() {
        let o = run(Cmd::new("sh").args([
            "-c",
            "head -c 52428800 /dev/zero | tr '\\0' x >&2; echo the-end >&2",
        ]))
        .await
        .unwrap();
        assert_eq!(o.status, Termination::Exited(0));
        assert!(o.stderr.len() <= STDERR_TAIL, "{}", o.stderr.len());
        assert!(o.stderr.len() > STDERR_TAIL / 2, "{}", o.stderr.len());
        assert!(o.stderr.ends_with(b"xxxthe-end\n"));
    }

    #[tokio::test]
    async fn an_escaped_daemon_holding_the_pipes_costs_at_most_the_drain_bound() {
        if crate::skip_unless(
            std::path::Path::new("/usr/bin/setsid").exists(),
            "setsid absent",
        ) {
            return;
        }
        // The daemon says it is out of the group (through a FIFO) before the
        // leader exits, so the group kill cannot reach it first.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("ready");
        let script = format!(
            "mkfifo '{f}'; setsid sh -c \"echo up > '{f}'; exec sleep 20\" & read x < '{f}'; echo hi; echo oops >&2",
            f = fifo.display()
        );
        let t0 = Instant::now();
        let o = run(Cmd::new("sh").args(["-c", &script])).await.unwrap();
        let total = t0.elapsed();
        assert_eq!(o.status, Termination::Exited(0));
        assert_eq!(o.stdout_str(), "hi");
        assert_eq!(o.stderr_str(), "oops");
        assert!(
            o.elapsed < Duration::from_secs(1),
            "elapsed {:?}",
            o.elapsed
        );
        assert!(total < Duration::from_secs(3), "returned after {total:?}");
        assert!(total >= DRAIN_BOUND, "the pipes were open: {total:?}");
    }

    #[tokio::test]
    async fn stdin_streams_from_a_reader_and_a_file() {
        let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
        let o = run(Cmd::new("wc")
            .arg("-c")
            .input(Input::Stream(SharedReader::new(std::io::Cursor::new(
                big.clone(),
            )))))
        .await
        .unwrap();
        assert_eq!(o.stdout_str(), big.len().to_string());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("in");
        std::fs::write(&f, &big).unwrap();
        let o = run(Cmd::new("sha256sum").input(Input::File(f)))
            .await
            .unwrap();
        assert!(o.stdout_str().starts_with(&crate::fsutil::sha256_hex(&big)));
    }

    /// A command carrying the scratch marker starts in its own attempt
    /// cgroup (clone3 into it, or joining it), with stdin, stdout, its
    /// working directory and its environment as asked; a program that is
    /// not there is an error, as for any other command.
    #[tokio::test]
    async fn a_marked_command_starts_in_its_own_cgroup() {
        if crate::skip_unless(cgroup_root().is_some(), "no writable cgroup v2 hierarchy") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let o = run(Cmd::new("sh")
            .args([
                "-c",
                "cat; pwd; echo \"$SAPHAN_SCRATCH\"; cat /proc/self/cgroup",
            ])
            .cwd(dir.path())
            .env(crate::git::SCRATCH_MARKER, "/x/tree")
            .stdin(b"in\n".to_vec()))
        .await
        .unwrap();
        assert_eq!(o.status, Termination::Exited(0), "{}", o.stderr_str());
        let out = o.stdout_str();
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("in"));
        assert_eq!(
            lines.next().map(std::path::PathBuf::from),
            Some(std::fs::canonicalize(dir.path()).unwrap())
        );
        assert_eq!(lines.next(), Some("/x/tree"));
        let mine = format!("/saphan-{}-", std::process::id());
        assert!(
            lines.any(|l| l.starts_with("0::") && l.contains(&mine)),
            "not in an attempt cgroup: {out}"
        );
        let missing =
            run(Cmd::new("saphan-no-such-program").env(crate::git::SCRATCH_MARKER, "/x/tree"))
                .await
                .unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn stdin_is_fed() {
        let o = run(Cmd::new("cat").stdin(b"abc".to_vec())).await.unwrap();
        assert_eq!(o.stdout, b"abc");
    }
}
