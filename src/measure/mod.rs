//! The one measurement core shared by certify, verify-union, verify-stream
//! and the affected tier — and by dispatch, which runs it against a scratch
//! tree on another machine. Four phases:
//!
//! 1. **prepare** ([`Setup`], [`Budget::attempt`]): open the repository and
//!    the config, select and preflight the provisions, resolve the suite,
//!    pick the budget — before any lock or tree, so every refusal comes
//!    first;
//! 2. **execute** ([`run_suite_with`]): place provisions and the exclude file
//!    in the tree *through its [`Transport`]*, then run the suite in the tree
//!    through an [`Executor`] ([`Host`]: a process on the machine via
//!    [`Transport::run`], in its own process group under the budget; a
//!    container executor plugs in here);
//! 3. **collect** ([`collect`]): the suite's stdout (already in a local file)
//!    and the files `report_path` matches, brought to a local directory when
//!    the tree is remote;
//! 4. **judge**: the same [`report::measure`] parsers (off the runtime), and
//!    [`record`] builds the record.
//!
//! Worktree creation and removal stay with the caller (certify checks out a
//! SHA; verify-union merges streams first; dispatch ships a bundle), so this
//! module never decides *which* tree is measured — only *how*.

pub mod bench;
pub mod collect;
pub mod conclude;
pub(crate) mod guard;
pub mod pipeline;
pub mod progress;

use crate::config::{Config, Provision};
use crate::error::{IoError, Result};
use crate::exec::{Cmd, Output, Sink, Termination};
use crate::git::Repo;
use crate::home::Home;
use crate::provision::{self, Placed};
use crate::record::{Avail, Record};
use crate::report::{self, Evidence, FailureKind, Measurement};
use crate::suite::ResolvedSuite;
use crate::transport::{Transport, TransportError};
use crate::worktree::Scratch;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::executor::{DEFAULT_SUITE_TIMEOUT, Executor, Host};

/// An attempt budget and where the number came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The wall-clock budget.
    pub duration: Duration,
    /// `default`, `config:<scope>.timeout` or `flag:--timeout`.
    pub source: String,
}

impl Budget {
    /// `--timeout` always wins; then the declared `timeout` of `scope`
    /// (`verify.full`…: `config:verify.full.timeout`, or
    /// `repo-config:verify.full.timeout` from the repository's own
    /// declaration); then [`DEFAULT_SUITE_TIMEOUT`].
    pub fn attempt(flag: Option<Duration>, suite: &ResolvedSuite, scope: &str) -> Budget {
        match (flag, suite.timeout) {
            (Some(d), _) => Budget {
                duration: d,
                source: "flag:--timeout".into(),
            },
            (None, Some(d)) => Budget {
                duration: d,
                source: format!("{}:{scope}.timeout", suite.source.prefix()),
            },
            (None, None) => Budget {
                duration: DEFAULT_SUITE_TIMEOUT,
                source: "default".into(),
            },
        }
    }
}

/// The process's cancellation token ([`crate::cancel::Token`]): Ctrl-C,
/// SIGTERM and SIGHUP cancel it once [`crate::cancel::install`] ran.
pub type Interrupt = crate::cancel::Token;

/// Whose build caches an attempt at `sha` may write
/// ([`crate::seal::Trust`]): `Trunk` when `trunk` (the ref the pointer
/// follows; only certify names one) contains it — saphan's hardened git
/// answers, blind to replace refs and grafts — `Other` otherwise.
pub async fn trust_of(repo: &Repo, sha: &str, trunk: Option<&str>) -> crate::seal::Trust {
    let on_trunk = match trunk {
        Some(t) => crate::git::git(&repo.top, &["merge-base", "--is-ancestor", sha, t])
            .await
            .is_ok(),
        None => false,
    };
    if on_trunk {
        crate::seal::Trust::Trunk
    } else {
        crate::seal::Trust::Other
    }
}

/// Prepare: the repository and config every verb opens first.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The repository.
    pub repo: Repo,
    /// The validated config.
    pub cfg: Config,
}

impl Setup {
    /// Open the repository containing `path`, then load its declaration
    /// ([`Config::for_repo`]: its own, winning over the operator's).
    ///
    /// Errors: `not-a-repository`, `bare-repository`, the config refusals.
    pub async fn open(home: &Home, path: &Path) -> Result<Setup> {
        let repo = Repo::open(path).await?;
        let cfg = Config::for_repo(home, &repo.common_dir)?;
        crate::record::check_appendable(&crate::record::attempts_path(&repo))?;
        Ok(Setup { repo, cfg })
    }

    /// [`Setup::open`] and the commit `rev` names, resolved in the same git
    /// call ([`Repo::open_resolving`]); a bad revision is reported after
    /// the config's refusals, as when each is asked alone.
    ///
    /// Errors: those of [`Setup::open`], then `bad-revision`.
    pub async fn open_at(home: &Home, path: &Path, rev: &str) -> Result<(Setup, String)> {
        let (repo, sha) = Repo::open_resolving(path, rev).await?;
        let cfg = Config::for_repo(home, &repo.common_dir)?;
        let sha = sha?;
        // A record this verb could not append is a measurement lost:
        // refuse before measuring, not after.
        crate::record::check_appendable(&crate::record::attempts_path(&repo))?;
        Ok((Setup { repo, cfg }, sha))
    }

    /// The provision entries that apply to this repository, preflighted
    /// (source exists, readable, non-empty), owned.
    ///
    /// Errors: the `provision-source-*` refusals.
    pub fn provisions(&self) -> Result<Vec<Provision>> {
        provisions(&self.cfg, &self.repo)
    }

    /// The full suite for commit `sha` (declared `verify.full`, or default-go
    /// when the tree has `go.mod`). The tree is listed only when the answer
    /// depends on it ([`against_tree`]): a declared suite does not wait for
    /// it. `purpose` completes the no-declaration refusal ("certify", …).
    ///
    /// Errors: the spec's no-declaration refusal, git failures.
    pub async fn full_suite(&self, sha: &str, purpose: &str) -> Result<ResolvedSuite> {
        against_tree(&self.repo, sha, |in_tree| {
            crate::suite::resolve_full(&self.cfg, &self.repo.top, purpose, in_tree)
        })
        .await?
        .map_err(Into::into)
    }
}

/// `check` of the tree of commit `sha`, listing the tree only when `check`
/// asks about a path of it: a first call answers every path with `false`
/// and counts only when no path was asked; otherwise the listing
/// ([`Repo::tree_files`], shared with a [`Repo::list_ahead`] under way) is
/// awaited and `check` runs again on it. `check` must answer the same for
/// the same tree (no side effects): it may run twice.
///
/// Errors: git failures listing the tree.
pub async fn against_tree<T>(
    repo: &Repo,
    sha: &str,
    check: impl Fn(&dyn Fn(&str) -> bool) -> T,
) -> std::result::Result<T, crate::git::GitError> {
    let asked = std::cell::Cell::new(false);
    let blind = check(&|_| {
        asked.set(true);
        false
    });
    if !asked.get() {
        return Ok(blind);
    }
    let files = repo.tree_files(sha).await?;
    Ok(check(&|p| files.iter().any(|f| f == p)))
}

/// The provision entries of `cfg` that apply to `repo`, preflighted
/// (source exists, readable, non-empty), owned — the one place every verb
/// selects them.
///
/// Errors: the `provision-source-*` refusals.
pub fn provisions(cfg: &Config, repo: &Repo) -> Result<Vec<Provision>> {
    let sel = provision::select(&cfg.provisions, &repo.top, &repo.common_dir);
    provision::preflight(&sel)?;
    Ok(sel.into_iter().cloned().collect())
}

/// What one suite run left.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// How the suite ended; `None` when the operator interrupted it.
    pub termination: Option<Termination>,
    /// The derived measurement.
    pub measurement: Measurement,
    /// Provisions placed.
    pub placed: Vec<Placed>,
    /// Suite wall time.
    pub elapsed: Duration,
    /// The last 4 KiB of the suite's stderr (for the operator, not the record).
    pub stderr_tail: String,
    /// The record id this attempt will carry (the log is named after it).
    pub id: String,
    /// Which program ran (record `program_path` / `program_version`).
    pub program: Program,
    /// The kept suite log, when [`Plan::log_dir`] asked for one.
    pub log: Option<SuiteLog>,
    /// The suite log still to be written, when the plan deferred it
    /// ([`Plan::log_deferred`]): `log` is `None` until its owner writes it
    /// ([`PendingLog::write`]) and puts the result there.
    pub pending_log: Option<PendingLog>,
    /// Submodules checked out at their gitlinks: (path, commit).
    pub submodules: Vec<(String, String)>,
    /// What ran the suite when the executor says ([`Executor::container_run`]).
    pub container: Option<crate::record::ContainerRun>,
    /// Host class: what kept the suite's processes from outliving it
    /// ([`crate::transport::Transport::containment`]); `None` when it never ran.
    pub containment: Option<crate::record::Containment>,
    /// How the suite was sealed ([`crate::seal::Seal`]); `None` when it
    /// never ran.
    pub seal: Option<crate::seal::Seal>,
}

impl SuiteRun {
    /// A run that never started, failed as `kind` with the note
    /// `<kind>: <detail>`.
    pub fn not_run(kind: FailureKind, detail: impl std::fmt::Display) -> SuiteRun {
        SuiteRun {
            started_at: crate::clock::now_rfc3339(),
            finished_at: crate::clock::now_rfc3339(),
            termination: None,
            measurement: Measurement::failed(kind, detail),
            placed: Vec::new(),
            elapsed: Duration::ZERO,
            stderr_tail: String::new(),
            id: crate::record::new_id(),
            program: Program::default(),
            log: None,
            pending_log: None,
            submodules: Vec::new(),
            container: None,
            containment: None,
            seal: None,
        }
    }

    /// The last `lines` lines of the kept suite log (stdout and stderr
    /// sections), for the operator on red and measurement-failed; empty when
    /// no log was kept.
    pub fn log_tail(&self, lines: usize) -> String {
        let Some(log) = &self.log else {
            return String::new();
        };
        let text = std::fs::read(&log.path)
            .map(|b| {
                let start = b.len().saturating_sub(64 * 1024);
                String::from_utf8_lossy(&b[start..]).into_owned()
            })
            .unwrap_or_default();
        let all: Vec<&str> = text.trim_end().lines().collect();
        // Only the section headers: the suite printed nothing.
        if all
            .iter()
            .all(|l| l.starts_with("=== suite ") || l.trim().is_empty())
        {
            return String::new();
        }
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Which program a suite ran (issue 12.5: two records of one SHA from two
/// toolchains must be distinguishable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    /// Resolved absolute path of `argv[0]` on the machine.
    pub path: Option<String>,
    /// Its version output, at most [`VERSION_CAP`] bytes.
    pub version: Option<String>,
}

/// How much of a version command's output is kept (4 KiB).
pub const VERSION_CAP: usize = 4096;

/// Budget for one version command.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The kept log of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteLog {
    /// `<log_dir>/<record id>.log`, absolute.
    pub path: PathBuf,
    /// Lowercase hex sha256 of its bytes.
    pub sha256: String,
}

/// The most bytes a suite log keeps (8 MiB): stdout's first [`LOG_HEAD`]
/// bytes and its last bytes up to the cap, then stderr's last
/// [`crate::exec::STDERR_TAIL`] bytes.
pub const LOG_CAP: usize = 8 * 1024 * 1024;

/// How much of the start of stdout a log keeps when stdout is too big.
pub const LOG_HEAD: usize = 1024 * 1024;

/// Resolve `suite`'s `argv[0]` on the local machine (`tree` for a relative
/// `./x`) and run its version command: default-go → `<path> version`; a
/// catalog row mapping `argv[0]` → its `version` argv with `{path}`; else no
/// version. Never fails: what cannot be learned is `None`.
pub async fn identify_local(
    suite: &ResolvedSuite,
    catalog: Option<&crate::catalog::Catalog>,
    tree: &Path,
) -> Program {
    let Some(token) = suite.argv.first() else {
        return Program::default();
    };
    let path = if token.contains('/') && !token.starts_with('/') {
        let p = tree.join(token.trim_start_matches("./"));
        p.is_file().then_some(p)
    } else {
        crate::exec::which(token)
    };
    let Some(path) = path.map(|p| std::fs::canonicalize(&p).unwrap_or(p)) else {
        return Program::default();
    };
    let shown = path.display().to_string();
    // In the tree, as the suite runs: a Go toolchain switch the tree's
    // go.mod asks for shows up in the version too.
    let version = match version_argv(suite, token, catalog, &shown) {
        Some(argv) => version_of(&Transport::Local(crate::transport::Local), &argv, tree).await,
        None => None,
    };
    Program {
        path: Some(shown),
        version,
    }
}

/// The version command of `suite`'s program `token` at `path`: the catalog
/// row mapping `token`'s basename → its `version` argv with `{path}`;
/// default-go → `<path> version`; else none.
fn version_argv(
    suite: &ResolvedSuite,
    token: &str,
    catalog: Option<&crate::catalog::Catalog>,
    path: &str,
) -> Option<Vec<String>> {
    match (&suite.source, catalog.and_then(|c| c.for_program(token))) {
        (_, Some((_, row))) if !row.version.is_empty() => Some(
            row.version
                .iter()
                .map(|w| w.replace("{path}", path))
                .collect(),
        ),
        (crate::suite::SuiteSource::DefaultGo, _) => Some(vec![path.to_string(), "version".into()]),
        _ => None,
    }
}

/// The program a fleet machine's attempt runs — `suite`'s `argv[0]`, the
/// capability row's declared absolute path — with its version measured by
/// this attempt: its version command (`version_argv`) run on the machine
/// through `t`, in the scratch tree, just before the suite. `version` is
/// `None` when the command could not start or failed there (a program gone
/// from its path): what the probe row once said is the row's
/// (`machine_program.version`), never this attempt's.
pub async fn identify_on(
    t: &Transport,
    suite: &ResolvedSuite,
    catalog: Option<&crate::catalog::Catalog>,
    tree: &Path,
) -> Program {
    let Some(token) = suite.argv.first().filter(|a| a.starts_with('/')) else {
        return Program::default();
    };
    let version = match version_argv(suite, token, catalog, token) {
        Some(argv) => version_of(t, &argv, tree).await,
        None => None,
    };
    Program {
        path: Some(token.clone()),
        version,
    }
}

/// Is nothing at `program`'s absolute path on `t`'s machine any more
/// (`test -e` exits 1: deleted, or its mount gone)? A relative or bare
/// name, or a check that could not run, says no: only a path known to be
/// empty is called gone.
async fn program_gone(t: &Transport, program: &str) -> bool {
    if !program.starts_with('/') {
        return false;
    }
    let argv = ["test", "-e", program].map(String::from);
    matches!(
        t.exec(&argv, VERSION_TIMEOUT).await,
        Ok(o) if o.status == Termination::Exited(1)
    )
}

/// Run a version command in `cwd` on `t`'s machine (budget
/// [`VERSION_TIMEOUT`]) and keep its stdout then stderr, trimmed, at most
/// [`VERSION_CAP`] bytes; none when it did not exit 0 (its words are an
/// error, not a version) or its stdout was not kept whole
/// ([`crate::exec::Termination::OutputLost`]: the text would be saphan's
/// refusal, not a version).
async fn version_of(t: &Transport, argv: &[String], cwd: &Path) -> Option<String> {
    let out = t
        .run(Cmd::from_argv(argv).cwd(cwd).timeout(VERSION_TIMEOUT))
        .await
        .ok()
        .filter(|o| o.status.success())?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let mut text = text.trim().to_string();
    if text.len() > VERSION_CAP {
        let mut cut = VERSION_CAP;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    (!text.is_empty()).then_some(text)
}

/// A suite log read and bounded, not yet written ([`PendingLog::write`]).
#[derive(Debug, Clone)]
pub struct PendingLog {
    /// `<log_dir>/<record id>.log`, absolute.
    path: PathBuf,
    /// Its bytes, at most [`LOG_CAP`] and a few lines.
    bytes: Vec<u8>,
}

impl PendingLog {
    /// Write it (whole or not at all: [`crate::fsutil::write_state`]), off
    /// the runtime. `None` when it cannot be written: the record then names
    /// no log.
    pub async fn write(self) -> Option<SuiteLog> {
        tokio::task::spawn_blocking(move || {
            // `<common>/saphan/logs/<id>.log`: `saphan/`, `logs/` and the
            // file are never followed through a symlink.
            let root = self.path.ancestors().nth(3)?;
            crate::fsutil::write_state(root, &self.path, &self.bytes).ok()?;
            Some(SuiteLog {
                sha256: crate::fsutil::sha256_hex(&self.bytes),
                path: self.path,
            })
        })
        .await
        .ok()
        .flatten()
    }
}

/// Read the bounded suite log of one attempt, for `dir/<id>.log`, off the
/// runtime: stdout (whole when it fits, else its first [`LOG_HEAD`] bytes,
/// an elision line, and its last bytes), then stderr's kept tail.
async fn read_log(
    dir: PathBuf,
    id: String,
    stdout: PathBuf,
    stderr: Vec<u8>,
) -> Option<PendingLog> {
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&stdout).ok();
        let len = f
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len())
            .unwrap_or(0) as usize;
        let room = LOG_CAP.saturating_sub(stderr.len() + 256);
        let mut log = Vec::with_capacity(len.min(room) + stderr.len() + 256);
        log.extend_from_slice(b"=== suite stdout ===\n");
        if let Some(f) = f.as_mut() {
            if len <= room {
                let _ = f.read_to_end(&mut log);
            } else {
                let mut head = vec![0u8; LOG_HEAD.min(room)];
                let _ = f.read_exact(&mut head);
                log.extend_from_slice(&head);
                let tail_len = room - head.len();
                log.extend_from_slice(
                    format!(
                        "\n=== [{} bytes of stdout elided] ===\n",
                        len - head.len() - tail_len
                    )
                    .as_bytes(),
                );
                let _ = f.seek(SeekFrom::Start((len - tail_len) as u64));
                let mut tail = Vec::with_capacity(tail_len);
                let _ = f.take(tail_len as u64).read_to_end(&mut tail);
                log.extend_from_slice(&tail);
            }
        }
        if !log.ends_with(b"\n") {
            log.push(b'\n');
        }
        log.extend_from_slice(b"=== suite stderr (last 1 MiB) ===\n");
        log.extend_from_slice(&stderr);
        Some(PendingLog {
            path: dir.join(format!("{id}.log")),
            bytes: log,
        })
    })
    .await
    .ok()
    .flatten()
}

/// Where and how to run one suite.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    /// The suite.
    pub suite: &'a ResolvedSuite,
    /// The attempt budget.
    pub budget: &'a Budget,
    /// Provision entries that apply (already preflighted).
    pub provisions: &'a [Provision],
    /// Extra environment for the suite (e.g. the affected protocol's variables).
    pub extra_env: &'a [(String, String)],
    /// What `report_path` is relative to, a path on the tree's machine;
    /// `None` = the tree.
    pub report_root: Option<&'a Path>,
    /// Also copy the suite's stdout here (a local path: the affected tier
    /// reads which packages the go test -json stream named); `None` = keep
    /// nothing.
    pub keep_stdout: Option<&'a Path>,
    /// Keep the bounded suite log in this local directory (normally
    /// `<git-common-dir>/saphan/logs`, see [`log_dir`]); `None` = no log.
    pub log_dir: Option<&'a Path>,
    /// The catalog, to find the program's version command;
    /// `None` = only default-go's `go version`.
    pub catalog: Option<&'a crate::catalog::Catalog>,
    /// Leave the log's write to the caller ([`SuiteRun::pending_log`]), so
    /// it can run beside the tree's removal; `false` = written before
    /// [`run_suite_with`] returns.
    pub log_deferred: bool,
    /// What vouched for the suite's program on its machine — a sentence
    /// naming the capability row that said `present` and the probe line
    /// that measures it again — when one did (a fleet machine's admitted
    /// program); `None` = nothing did. A program so vouched for that cannot
    /// be started because nothing is at its path any more is
    /// `program-vanished`, not a `crash`.
    pub vouched: Option<&'a str>,
    /// How a host-class run is sealed on its machine; `None` = the
    /// default: `auto` on this machine ([`crate::seal::local`]), unsealed
    /// on a machine whose seal nobody measured.
    pub seal: Option<&'a SealPlan>,
}

/// How one host-class attempt is sealed on its machine ([`crate::seal`]).
#[derive(Debug, Clone)]
pub struct SealPlan {
    /// `auto`, `required` or `off`.
    pub mode: crate::seal::Mode,
    /// Where the mode came from (`--seal`, `verify.full.seal`, `default`),
    /// for the record's words.
    pub source: String,
    /// What the machine can seal with.
    pub capability: crate::seal::Capability,
    /// The attempt's build caches on the machine: an existing directory of
    /// its trust class ([`crate::seal::Trust`]), given to the suite as
    /// `XDG_CACHE_HOME` with `GOCACHE` and `GOMODCACHE` inside it
    /// ([`crate::seal::cache_env`]). `None`: a sealed suite caches in its
    /// private temp dir, an unsealed one where its environment says.
    pub caches: Option<PathBuf>,
    /// More paths on the machine the suite writes (the affected tier's run
    /// directory, which holds its report directory and scope file).
    pub writable: Vec<PathBuf>,
    /// The attempt's private temp dir on the machine (an existing, empty
    /// directory the bench removes with the attempt; the suite's
    /// `TMPDIR`); `None`: on this machine, a `tmp/` made in the attempt's
    /// run directory — a fleet machine's bench always names one.
    pub tmp: Option<PathBuf>,
}

impl SealPlan {
    /// The seal mode in force and where it came from: `--seal` always
    /// wins (`flag:--seal`); then the suite's declared `seal`
    /// (`config:<scope>.seal`); then `auto` (`default`).
    pub fn mode_of(
        flag: Option<crate::seal::Mode>,
        suite: &ResolvedSuite,
        scope: &str,
    ) -> (crate::seal::Mode, String) {
        match (flag, suite.seal) {
            (Some(m), _) => (m, "flag:--seal".into()),
            (None, Some(m)) => (m, format!("{}:{scope}.seal", suite.source.prefix())),
            (None, None) => (crate::seal::Mode::Auto, "default".into()),
        }
    }
    /// This machine's seal under `mode` (from `source`), caching nowhere
    /// but the attempt's own temp dir until [`SealPlan::caches`] says.
    pub fn here(mode: crate::seal::Mode, source: impl Into<String>) -> SealPlan {
        SealPlan {
            mode,
            source: source.into(),
            capability: crate::seal::local().clone(),
            caches: None,
            writable: Vec::new(),
            tmp: None,
        }
    }
    /// With the build caches in `dir` (a directory on the machine).
    pub fn caches(self, dir: Option<PathBuf>) -> SealPlan {
        SealPlan {
            caches: dir,
            ..self
        }
    }
    /// With `dir` writable too.
    pub fn writable(mut self, dir: Option<PathBuf>) -> SealPlan {
        self.writable.extend(dir);
        self
    }
}

impl<'a> Plan<'a> {
    /// The plan of running `suite` under `budget` with `provisions` — the
    /// one place a plan is made; the rest defaults to nothing: no extra
    /// environment, report paths relative to the tree, no stdout kept, no
    /// log, no catalog.
    pub fn new(suite: &'a ResolvedSuite, budget: &'a Budget, provisions: &'a [Provision]) -> Self {
        Plan {
            suite,
            budget,
            provisions,
            extra_env: &[],
            report_root: None,
            keep_stdout: None,
            log_dir: None,
            catalog: None,
            log_deferred: false,
            vouched: None,
            seal: None,
        }
    }
    /// With the program vouched for by `vouched` (see [`Plan::vouched`]).
    pub fn vouched(self, vouched: Option<&'a str>) -> Self {
        Plan { vouched, ..self }
    }
    /// Sealed as `seal` says (see [`Plan::seal`]).
    pub fn seal(self, seal: Option<&'a SealPlan>) -> Self {
        Plan { seal, ..self }
    }
    /// With extra environment for the suite.
    pub fn extra_env(self, extra_env: &'a [(String, String)]) -> Self {
        Plan { extra_env, ..self }
    }
    /// With `report_path` relative to `root` (a path on the tree's machine).
    pub fn report_root(self, report_root: Option<&'a Path>) -> Self {
        Plan {
            report_root,
            ..self
        }
    }
    /// Also copying the suite's stdout to the local file `keep`.
    pub fn keep_stdout(self, keep_stdout: Option<&'a Path>) -> Self {
        Plan {
            keep_stdout,
            ..self
        }
    }
    /// Keeping the bounded suite log in the local directory `dir`.
    pub fn log_dir(self, log_dir: Option<&'a Path>) -> Self {
        Plan { log_dir, ..self }
    }
    /// Returning the log unwritten, in [`SuiteRun::pending_log`]: the
    /// caller writes it ([`PendingLog::write`]) before it records the run.
    pub fn log_deferred(self) -> Self {
        Plan {
            log_deferred: true,
            ..self
        }
    }
    /// With the catalog (the program's version command).
    pub fn catalog(self, catalog: Option<&'a crate::catalog::Catalog>) -> Self {
        Plan { catalog, ..self }
    }
}

/// `<git-common-dir>/saphan/logs`: where the suite logs of `repo`'s
/// attempts are kept, next to `attempts.jsonl`.
pub fn log_dir(repo: &Repo) -> PathBuf {
    repo.state_dir().join("logs")
}

/// Run the suite of `plan` in `scratch`, then remove the scratch worktree —
/// whatever the run did. The usual shape of one measurement.
///
/// Errors: those of [`run_suite`], then a failure to remove the worktree.
pub async fn run_then_remove(
    scratch: Scratch,
    plan: Plan<'_>,
    interrupt: &Interrupt,
) -> Result<SuiteRun> {
    let run = run_suite(&scratch, plan, interrupt).await;
    let removed = scratch.remove().await;
    let run = run?;
    removed?;
    Ok(run)
}

/// [`run_suite_with`] the [`Host`] executor.
pub async fn run_suite(
    scratch: &Scratch,
    plan: Plan<'_>,
    interrupt: &Interrupt,
) -> Result<SuiteRun> {
    run_suite_with(scratch, plan, &Host, interrupt).await
}

/// Execute, collect and judge the suite of `plan` in the scratch worktree
/// `scratch` on its machine (provisions and the exclude file go there,
/// through its transport) with `executor`.
///
/// Errors: provision placement refusals, or an I/O failure preparing the
/// run. A suite that cannot be started is a measurement (failed), not an
/// error: the attempt happened.
pub async fn run_suite_with(
    scratch: &Scratch,
    plan: Plan<'_>,
    executor: &dyn Executor,
    interrupt: &Interrupt,
) -> Result<SuiteRun> {
    if let Some(why) = &scratch.submodule_missing {
        let mut run = SuiteRun::not_run(
            FailureKind::SubmoduleMissing,
            format!("{why} — the SHA was not measured"),
        );
        run.submodules = scratch.submodules.clone();
        return Ok(run);
    }
    let t = scratch.transport();
    // Exactly the commit, or the suite does not run (docs/certify.md);
    // beside it, which program runs and its version, measured by this
    // attempt where the suite runs (its version command only reads the
    // tree): resolved here for a local tree; on a fleet machine, the row's
    // declared path with its version command run there (a container's
    // program is the image's: not measured).
    let (verified, program) = tokio::join!(scratch.verify_tree(), async {
        if t.is_local() {
            identify_local(plan.suite, plan.catalog, &scratch.path).await
        } else if executor.class() == "host" {
            identify_on(t, plan.suite, plan.catalog, &scratch.path).await
        } else {
            Program::default()
        }
    });
    if let Some(why) = verified? {
        let mut run = SuiteRun::not_run(
            FailureKind::TreeMismatch,
            format!("{why} — the suite did not run; nothing was measured"),
        );
        run.submodules = scratch.submodules.clone();
        return Ok(run);
    }
    let started_at = crate::clock::now_rfc3339();
    let id = crate::record::new_id();
    let exclude = scratch.git_dir.join("saphan-exclude");
    let placed = provision::place_on(t, plan.provisions, &scratch.path, &exclude).await?;
    let mut env: Vec<(String, String)> = Vec::new();
    if !placed.is_empty() {
        env.extend(provision::exclude_env(&exclude));
    }
    env.extend(plan.extra_env.iter().cloned());

    let run_dir = crate::fsutil::run_tempdir("saphan-run-").map_err(|source| IoError::Io {
        action: "create a temp directory",
        path: std::env::temp_dir(),
        source,
    })?;
    let stdout_path = run_dir.path().join("stdout");
    // The seal: a host-class suite runs in its own mount and PID
    // namespaces where the machine can ([`crate::seal`]).
    let mut sealing = Sealing::decide(executor.class(), plan, scratch, run_dir.path());
    env.extend(sealing.cache_env());
    let t0 = Instant::now();
    let outcome = loop {
        // The suite inherits none of git's repository-local variables
        // (`exec::run` drops them), so git inside it finds the scratch tree
        // from its working directory; the marker lets a later attempt find
        // it should it outlive a killed saphan.
        let mut cmd = Cmd::from_argv(&sealing.argv(&plan.suite.argv))
            .cwd(&scratch.path)
            .env(crate::git::SCRATCH_MARKER, &scratch.path)
            .timeout(plan.budget.duration)
            .stdout(Sink::File(stdout_path.clone()));
        for (k, v) in &env {
            cmd = cmd.env(k, v);
        }
        if sealing.refused.is_some() {
            break Some(Ok(Output {
                status: Termination::Exited(1),
                stdout: Vec::new(),
                stderr: Vec::new(),
                elapsed: Duration::ZERO,
            }));
        }
        let intr = interrupt.clone();
        let outcome = tokio::select! {
            r = executor.execute(t, cmd) => Some(r),
            _ = intr.cancelled() => None,
        };
        // bwrap's own failure to set up the namespaces, confirmed with a
        // sealed `true`: the suite never started. `auto` runs it unsealed
        // (and says so); `required` ends the attempt as `seal-failed`.
        if let Some(Ok(out)) = &outcome
            && let Some(line) = sealing.setup_failed(t, out).await
        {
            if sealing.fall_back(line) {
                continue;
            }
            break Some(Ok(Output {
                status: Termination::Exited(1),
                stdout: Vec::new(),
                stderr: Vec::new(),
                elapsed: Duration::ZERO,
            }));
        }
        break outcome;
    };
    // bwrap's monitor (the sandbox's pid 1) exits 128+N for a suite killed
    // by signal N: read it as the signal, as a machine's watchdog reads a
    // shell's status — a sealed suite that dies of SIGKILL crashed, it did
    // not exit 137.
    let outcome = match outcome {
        Some(Ok(mut out)) if sealing.wrap.is_some() => {
            if let Termination::Exited(c) = out.status {
                out.status = Termination::of_reported_status(c);
            }
            Some(Ok(out))
        }
        o => o,
    };
    // The suite's wall time as its executor measured it, start to exit
    // (a container run leaves out the one-time fill of its image's
    // toolchain volumes); the core's own clock when nothing came back.
    let elapsed = match &outcome {
        Some(Ok(out)) => out.elapsed,
        _ => t0.elapsed(),
    };
    // Interrupted mid-run: the suite's processes ran (and were killed)
    // under the same containment as a run that ended.
    let interrupted = outcome.is_none();
    // The suite's program could not be started: when its machine's row
    // vouched for it and nothing is at its path any more, the machine
    // failed the attempt (`program-vanished`), not the suite.
    // bwrap's words when the sealed program could not be started, read once.
    let exec_failed = match &outcome {
        Some(Ok(out)) if sealing.refused.is_none() => sealing.exec_failed(out),
        _ => None,
    };
    let not_started = match &outcome {
        Some(Err(TransportError::Spawn { .. } | TransportError::RemoteSpawn { .. })) => true,
        Some(Ok(_)) => exec_failed.is_some(),
        _ => false,
    };
    let vanished = match plan.vouched {
        Some(vouched) if not_started => program_gone(t, &plan.suite.argv[0])
            .await
            .then_some(vouched),
        _ => None,
    };
    let start_failed = |why: String| match vanished {
        Some(vouched) => Measurement::failed(
            FailureKind::ProgramVanished,
            format!(
                "the suite's program `{}` is gone from {}: nothing is at that path any more ({why}), though {vouched}",
                plan.suite.argv[0],
                t.describe()
            ),
        ),
        None => Measurement::failed(FailureKind::Crash, why),
    };
    let mut stderr_all: Vec<u8> = Vec::new();
    let (termination, mut measurement, stderr_tail) = match outcome {
        None => (
            None,
            Measurement::failed(
                FailureKind::Interrupted,
                format!(
                    "{}; the suite's process group was killed",
                    interrupt
                        .reason()
                        .unwrap_or(crate::cancel::Reason::Requested)
                        .words()
                ),
            ),
            String::new(),
        ),
        Some(Err(TransportError::Spawn { source, .. })) => (
            None,
            start_failed(format!(
                "the suite's program `{}` could not be started: {source}",
                plan.suite.argv[0]
            )),
            String::new(),
        ),
        Some(Err(TransportError::RemoteSpawn { alias, detail, .. })) => (
            None,
            start_failed(format!(
                "the suite's program `{}` could not be started on {alias}: {detail}",
                plan.suite.argv[0]
            )),
            String::new(),
        ),
        Some(Err(e)) => (
            None,
            Measurement::failed(
                FailureKind::from(&e),
                format!("the suite's run on {} failed: {e}", t.describe()),
            ),
            String::new(),
        ),
        Some(Ok(_)) if sealing.refused.is_some() => (
            None,
            Measurement::failed(
                FailureKind::SealFailed,
                sealing.refused.clone().unwrap_or_default(),
            ),
            String::new(),
        ),
        Some(Ok(out)) if exec_failed.is_some() => (
            None,
            start_failed(format!(
                "the suite's program `{}` could not be started on {}: {}",
                plan.suite.argv[0],
                t.describe(),
                exec_failed.clone().unwrap_or_default()
            )),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Some(Ok(out)) => {
            if !stdout_path.exists() {
                let _ = std::fs::write(&stdout_path, b"");
            }
            let scope = plan.suite.source.scope();
            let key = match plan.report_root {
                Some(_) => format!("{scope}.report_path (relative to SAPHAN_AFFECTED_REPORT_DIR)"),
                None => format!("{scope}.report_path"),
            };
            // Collect: the report files, brought here when the tree is remote.
            let machine_root = plan.report_root.unwrap_or(&scratch.path).to_path_buf();
            let collected = match (plan.suite.report, plan.suite.report_path.as_deref()) {
                (report::ReportKind::JunitXml, Some(pattern)) if out.status.code().is_some() => {
                    let local = run_dir.path().join("reports");
                    let _ = std::fs::create_dir_all(&local);
                    collect::reports(t, &machine_root, pattern, &local).await
                }
                _ => Ok(machine_root.clone()),
            };
            // Judge: the same parsers, off the runtime.
            let m = match collected {
                Err(e) => Measurement::report_failed(&e),
                Ok(root) => judge(plan.suite, out.status, stdout_path.clone(), root, key).await,
            };
            if let Some(keep) = plan.keep_stdout {
                let _ = std::fs::copy(&stdout_path, keep);
            }
            let tail_start = out.stderr.len().saturating_sub(4096);
            let tail = String::from_utf8_lossy(&out.stderr[tail_start..]).into_owned();
            stderr_all = out.stderr;
            (Some(out.status), m, tail)
        }
    };
    measurement.notes.extend(executor.take_notes());
    let pending = match plan.log_dir {
        Some(dir) => {
            read_log(
                dir.to_path_buf(),
                id.clone(),
                stdout_path.clone(),
                stderr_all,
            )
            .await
        }
        None => None,
    };
    let (log, pending_log) = match pending {
        Some(p) if plan.log_deferred => (None, Some(p)),
        Some(p) => (p.write().await, None),
        None => (None, None),
    };
    let containment = match (
        executor.container_run(),
        termination.is_some() || interrupted,
    ) {
        (None, true) => t.containment().await,
        _ => None,
    };
    Ok(SuiteRun {
        started_at,
        finished_at: crate::clock::now_rfc3339(),
        termination,
        measurement,
        placed,
        elapsed,
        stderr_tail,
        id,
        program,
        log,
        pending_log,
        submodules: scratch.submodules.clone(),
        container: executor.container_run(),
        containment,
        seal: (termination.is_some() || interrupted || sealing.refused.is_some())
            .then(|| sealing.record.clone())
            .flatten(),
    })
}

/// How one run of [`run_suite_with`] is sealed, decided from its
/// [`SealPlan`] and the executor's class, and what the run showed.
struct Sealing {
    /// bwrap's path and the attempt's paths, while the run is sealed.
    wrap: Option<(String, crate::seal::Bounds)>,
    /// The record's `seal` (`None`: the executor seals itself, or does
    /// not say).
    record: Option<crate::seal::Seal>,
    /// The mode in force.
    mode: crate::seal::Mode,
    /// The attempt's cache directory, when the plan gave one.
    caches: Option<PathBuf>,
    /// Why the run did not start: sealing was required and failed.
    refused: Option<String>,
}

impl Sealing {
    fn decide(class: &str, plan: Plan<'_>, scratch: &Scratch, run_dir: &Path) -> Sealing {
        use crate::seal::{Capability, Mode, Seal};
        let default;
        let sp = match plan.seal {
            Some(sp) => sp,
            None => {
                default = if scratch.transport().is_local() {
                    SealPlan::here(Mode::Auto, "default")
                } else {
                    SealPlan {
                        mode: Mode::Auto,
                        source: "default".into(),
                        capability: Capability::Unable(
                            "nobody measured this machine's seal".into(),
                        ),
                        caches: None,
                        writable: Vec::new(),
                        tmp: None,
                    }
                };
                &default
            }
        };
        let mut s = Sealing {
            wrap: None,
            record: None,
            mode: sp.mode,
            caches: sp.caches.clone(),
            refused: None,
        };
        if class != "host" {
            // The container class is sealed by its engine (read-only git
            // dirs, its own namespaces) and mounts its own caches.
            s.record = Some(Seal::container());
            s.caches = None;
            return s;
        }
        match (sp.mode, &sp.capability) {
            (Mode::Off, _) => s.record = Some(Seal::off(&sp.source)),
            (Mode::Required, Capability::Unable(why)) => {
                s.refused = Some(format!(
                    "the seal is required ({}) and this machine cannot seal: {why}",
                    sp.source
                ));
                s.record = Some(Seal::unsealed(why.clone()));
            }
            (Mode::Auto, Capability::Unable(why)) => s.record = Some(Seal::unsealed(why.clone())),
            (_, Capability::Tool(tool)) => {
                let mut writable = vec![scratch.path.clone(), scratch.git_dir.clone()];
                writable.extend(sp.caches.iter().cloned());
                writable.extend(sp.writable.iter().cloned());
                if let Some(r) = plan.report_root
                    && !writable.iter().any(|w| r.starts_with(w))
                {
                    writable.push(r.to_path_buf());
                }
                // The private temp dir: the plan's on a machine, a fresh
                // one in the run dir here.
                let tmp = match (&sp.tmp, scratch.transport().is_local()) {
                    (Some(t), _) => Some(t.clone()),
                    (None, true) => {
                        let t = run_dir.join("tmp");
                        std::fs::create_dir(&t).ok().map(|()| t)
                    }
                    (None, false) => None,
                };
                let Some(tmp) = tmp else {
                    let why = "no private temp dir could be made for the suite".to_string();
                    if sp.mode == Mode::Required {
                        s.refused = Some(format!("the seal is required ({}) and {why}", sp.source));
                    }
                    s.record = Some(Seal::unsealed(why));
                    return s;
                };
                let bounds = crate::seal::Bounds {
                    writable,
                    tmp,
                    cwd: scratch.path.clone(),
                };
                s.record = Some(Seal::sealed(tool));
                s.wrap = Some((tool.clone(), bounds));
            }
        }
        s
    }

    /// The environment of the attempt's caches: the plan's cache directory,
    /// or — sealed without one — `.cache` in the suite's private temp dir.
    fn cache_env(&self) -> Vec<(String, String)> {
        match (&self.caches, &self.wrap) {
            (Some(dir), _) => crate::seal::cache_env(dir),
            (None, Some((_, b))) => crate::seal::cache_env(&b.tmp.join(".cache")),
            (None, None) => Vec::new(),
        }
    }

    /// The argv to run: `argv` sealed, or as it is.
    fn argv(&self, argv: &[String]) -> Vec<std::ffi::OsString> {
        let argv: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
        match &self.wrap {
            Some((tool, bounds)) => crate::seal::argv(tool, bounds, &argv),
            None => argv,
        }
    }

    /// bwrap's first line, when the sealed run ended as bwrap's own setup
    /// failure and a sealed `true` on the same machine fails too.
    async fn setup_failed(&self, t: &Transport, out: &Output) -> Option<String> {
        let (tool, bounds) = self.wrap.as_ref()?;
        let line = crate::seal::setup_failure(out.status.code(), &out.stderr)?;
        if crate::seal::exec_failure(&line).is_some() {
            return None;
        }
        let probe = Cmd::from_argv(&crate::seal::probe_argv(tool, bounds))
            .cwd(&bounds.cwd)
            .timeout(crate::seal::PROBE_TIMEOUT);
        match t.run(probe).await {
            Ok(o) if o.status.success() => None,
            _ => Some(line),
        }
    }

    /// After a confirmed setup failure: `true` when the run goes on
    /// unsealed (`auto`), `false` when it ends (`required`).
    fn fall_back(&mut self, line: String) -> bool {
        let why = format!("bwrap could not seal on this machine: {line}");
        self.wrap = None;
        self.record = Some(crate::seal::Seal::unsealed(why.clone()));
        if self.mode == crate::seal::Mode::Required {
            self.refused = Some(format!("the seal is required and {why}"));
            return false;
        }
        true
    }

    /// bwrap's words when the sealed program could not be started.
    fn exec_failed(&self, out: &Output) -> Option<String> {
        self.wrap.as_ref()?;
        crate::seal::setup_failure(out.status.code(), &out.stderr)
            .and_then(|l| crate::seal::exec_failure(&l).map(str::to_string))
    }
}

/// Judge: [`report::measure`] on the evidence, on a blocking thread (a big
/// report can take a while to parse).
async fn judge(
    suite: &ResolvedSuite,
    termination: Termination,
    stdout: PathBuf,
    report_root: PathBuf,
    key: String,
) -> Measurement {
    let kind = suite.report;
    let pattern = suite.report_path.clone();
    tokio::task::spawn_blocking(move || {
        report::measure(&Evidence {
            kind,
            termination,
            stdout: &stdout,
            report_root: &report_root,
            report_path: pattern.as_deref(),
            report_path_key: &key,
        })
    })
    .await
    .unwrap_or_else(|e| {
        Measurement::failed(
            FailureKind::Crash,
            format!("reading the report failed: {e}"),
        )
    })
}

/// Who measured what, for [`record`].
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The verb (`certify`, `verify-union`, …).
    pub verb: &'a str,
    /// Repository top.
    pub repo: &'a Path,
    /// The SHA measured (for a union: the merge commit or base; see the verb).
    pub sha: &'a str,
    /// `local` or a fleet id.
    pub machine: &'a str,
    /// `host` or `container`.
    pub class: &'a str,
}

/// Build the record of one suite run.
pub fn record(
    subject: Subject<'_>,
    suite: &ResolvedSuite,
    budget: &Budget,
    run: &SuiteRun,
) -> Record {
    let m = &run.measurement;
    Record {
        format: crate::record::FORMAT,
        id: run.id.clone(),
        verb: subject.verb.to_string(),
        repo: subject.repo.display().to_string(),
        sha: subject.sha.to_string(),
        machine: subject.machine.to_string(),
        class: subject.class.to_string(),
        started_at: run.started_at.clone(),
        finished_at: run.finished_at.clone(),
        verdict: m.verdict,
        failure: m.failure.clone(),
        suite_source: suite.source.as_str(),
        suite_argv: suite.argv.clone(),
        report: suite.report,
        suite_report_path: suite.report_path.clone(),
        suite_report_files: m.report_files.clone(),
        count: Avail::from(m.count),
        count_derived: m.count_derived,
        named_tests: Avail::from(m.named_tests.clone()),
        suite_exit_code: run.termination.and_then(|t| t.code()),
        budget: humantime::format_duration(budget.duration).to_string(),
        budget_seconds: budget.duration.as_secs_f64(),
        budget_source: budget.source.clone(),
        suite_seconds: (run.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        provisions: run.placed.clone(),
        notes: m.notes.clone(),
        program_path: run.program.path.clone(),
        program_version: run.program.version.clone().map(crate::record::Avail::Value),
        suite_log: run.log.as_ref().map(|l| l.path.display().to_string()),
        suite_log_sha256: run.log.as_ref().map(|l| l.sha256.clone()),
        verified_pointer: None,
        base: None,
        bundle_bytes: None,
        container: run.container.clone(),
        dispatch_machines: None,
        interrupted: false,
        machine_program: None,
        phases: None,
        remote_tree: None,
        slurm_job: None,
        containment: run.containment,
        seal: run.seal.clone(),
        step_budget: None,
        step_budget_seconds: None,
        step_budget_source: None,
        steps: None,
        stream: None,
        streams: None,
        submodules: run
            .submodules
            .iter()
            .map(|(p, c)| crate::record::SubmoduleAt {
                commit: c.clone(),
                path: p.clone(),
            })
            .collect(),
        trunk: None,
        union: None,
        shard: None,
        package_seconds: None,
        retry_of: None,
    }
}
