//! Container-class runs: the declared suite in a container made from the
//! operator's pinned suite image, on the machine's Docker engine (bollard
//! over the machine's socket — local, or forwarded over its SSH connection).
//!
//! - [`resolve_image`]: the suite image pin (the same two forms as the probe
//!   image's, [`Pin`]) checked on the engine before anything runs; a tag,
//!   a malformed pin or an absent image is a refusal, and nothing is pulled.
//! - [`run`]: create (tree bind-mounted at its own path, working directory the
//!   tree, argv the suite, no TTY, network off unless asked, labels naming the
//!   attempt), start, wait under the budget, read the demultiplexed logs, and
//!   remove the container on every path (budget, Ctrl-C, lost engine).
//!
//! The operator's guide is `docs/dispatch.md`, "Container class".

use super::engine::{
    CLEANUP_BUDGET, cleanup_deadline, connect, read_logs, remove_container, wait_status,
};
use super::toolchain;
use super::{DockerError, Pin};
use crate::cancel::Token as Interrupt;
use crate::exec::{STDERR_TAIL, Termination};
use crate::transport::Transport;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::CreateContainerOptions;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Label every suite container carries: the attempt (record) id.
pub const LABEL_ATTEMPT: &str = "saphan.attempt";
/// Label: the repository measured (its top directory on the operator's machine).
pub const LABEL_REPO: &str = "saphan.repo";
/// Label: the SHA measured.
pub const LABEL_SHA: &str = "saphan.sha";
/// Label: the machine (fleet id, or `local`) the container runs the suite
/// for — machines of one invocation may share one engine.
pub const LABEL_MACHINE: &str = "saphan.machine";

/// Label: the saphan process that made the container, as
/// `<host id>/<boot id>/<pid>/<start time>` — the host id is this machine's
/// `/etc/machine-id` (else its host name), the boot id
/// `/proc/sys/kernel/random/boot_id`, the start time field 22 of
/// `/proc/<pid>/stat` (so a reused pid is not mistaken for it). While that
/// process lives the container's attempt is not over; [`reap_over`] removes
/// the containers of attempts that are.
pub const LABEL_CONTROLLER: &str = "saphan.controller";

/// This saphan process, as [`LABEL_CONTROLLER`] names it (`None` where
/// `/proc` does not say: its containers are then never reaped by another).
pub fn controller_id() -> Option<&'static str> {
    static ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let pid = std::process::id();
        let start = start_time(pid)?;
        Some(format!("{}/{}/{pid}/{start}", host_id()?, boot_id()?))
    })
    .as_deref()
}

fn host_id() -> Option<String> {
    ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty() && !s.contains('/'))
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Field 22 (start time, clock ticks since boot) of `/proc/<pid>/stat`;
/// `None` when no such process lives (a zombie counts as ended).
fn start_time(pid: u32) -> Option<u64> {
    let st = crate::procs::proc_stat(i32::try_from(pid).ok()?)?;
    (!st.ended()).then_some(st.start_time)
}

/// Whether the attempt whose container carries `controller` (a
/// [`LABEL_CONTROLLER`] value) is over, judged on this machine: `Some(why)`
/// when its saphan process is gone (or this machine rebooted since); `None`
/// while it lives, or when the label names another machine's process (its
/// liveness cannot be seen from here — that machine's next run reaps it).
pub fn attempt_over(controller: &str) -> Option<String> {
    let mut p = controller.splitn(4, '/');
    let (host, boot, pid, start) = (p.next()?, p.next()?, p.next()?, p.next()?);
    if Some(host) != host_id().as_deref() {
        return None;
    }
    if Some(boot) != boot_id().as_deref() {
        return Some("this machine has rebooted since its saphan ran".into());
    }
    let pid: u32 = pid.parse().ok()?;
    let start: u64 = start.parse().ok()?;
    match start_time(pid) {
        Some(s) if s == start => None,
        _ => Some(format!("its saphan process {pid} is gone")),
    }
}

/// Remove, on the engine at `socket`, every saphan suite container whose
/// attempt is over ([`attempt_over`] on its [`LABEL_CONTROLLER`]): what a
/// saphan killed mid-run (kill -9, a crash, a reboot) left. Returns one
/// record note per container: `reaped: container NAME (saphan.attempt=…,
/// saphan.machine=…) …`, or why it could not be removed with the command
/// that removes it. Containers of live saphan processes (this one's other
/// machines, another invocation's) and of other machines' controllers are
/// never touched. Bounded by [`CLEANUP_BUDGET`] per engine request; an
/// engine that does not answer gives no note (the run then fails on its
/// own terms).
pub async fn reap_over(transport: &Transport, socket: &str) -> Vec<String> {
    let Ok(docker) = connect(transport, socket, CLEANUP_BUDGET).await else {
        return Vec::new();
    };
    let opts = bollard::query_parameters::ListContainersOptions {
        all: true,
        filters: Some([("label".to_string(), vec![LABEL_CONTROLLER.to_string()])].into()),
        ..Default::default()
    };
    let found = match tokio::time::timeout(CLEANUP_BUDGET, docker.list_containers(Some(opts))).await
    {
        Ok(Ok(f)) => f,
        _ => return Vec::new(),
    };
    let mut notes = Vec::new();
    for c in found {
        let labels = c.labels.clone().unwrap_or_default();
        let Some(why) = labels.get(LABEL_CONTROLLER).and_then(|v| attempt_over(v)) else {
            continue;
        };
        let Some(id) = c.id.clone() else { continue };
        let name = c
            .names
            .as_ref()
            .and_then(|n| n.first())
            .map(|n| n.trim_start_matches('/').to_string())
            .unwrap_or_else(|| id.clone());
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let what = format!(
            "container {name} ({LABEL_ATTEMPT}={}, {LABEL_MACHINE}={}, {})",
            label(LABEL_ATTEMPT),
            label(LABEL_MACHINE),
            c.state
                .map(|s| s.to_string())
                .unwrap_or_else(|| "state unknown".into()),
        );
        match remove_container(transport, socket, Some(&docker), &id, cleanup_deadline()).await {
            Ok(()) => notes.push(format!(
                "reaped: {what}, left by an attempt that is over ({why})"
            )),
            Err(e) => notes.push(format!(
                "{what} was left by an attempt that is over ({why}) and could not be removed ({e}); remove it on the machine: docker rm -f {name}"
            )),
        }
    }
    notes
}

/// The container name of `attempt` on `machine`: `saphan-suite-<attempt>-<machine>`
/// (unique per engine, also when several machines of one invocation share it).
pub fn container_name(attempt: &str, machine: &str) -> String {
    format!("saphan-suite-{attempt}-{machine}")
}

/// Extra time the engine's requests get beyond the suite's budget (the wait
/// request lives as long as the suite does).
const REQUEST_SLACK: Duration = Duration::from_secs(30);

/// Refusals of a container-class run, all before anything runs on the
/// machine (no worktree, no container, no record).
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// `--class container` without `--image`.
    #[error(
        "certify --class container needs the suite image: no --image was given — pass --image sha256:<image id> (a local image ID, what `docker build`/`docker load` printed) or --image NAME@sha256:<registry digest> (docs/dispatch.md, \"Container class\")"
    )]
    ImageMissing,
    /// The suite image is named by a tag.
    #[error(
        "--image `{image}` is a tag; a tag can point at different bytes tomorrow, so it is never accepted — pin the image ID (`docker image inspect --format '{{{{.Id}}}}' {image}`) or a registry digest NAME@sha256:… instead"
    )]
    ImageTag {
        /// The value given.
        image: String,
    },
    /// The suite image value is neither pin form.
    #[error(
        "--image `{image}` is not a pin: {why} — write sha256:<64 lowercase hex> (a local image ID) or NAME@sha256:<64 lowercase hex> (a registry digest)"
    )]
    ImagePinMalformed {
        /// The value given.
        image: String,
        /// What is wrong with it.
        why: String,
    },
    /// The machine's engine holds no image carrying the pin.
    #[error(
        "machine `{machine}`: the engine at unix://{socket} holds no image {image} ({detail}); nothing was pulled or run — put the image there:\n  {load}"
    )]
    ImageAbsent {
        /// The machine id (`local` for this one).
        machine: String,
        /// The engine's socket on the machine.
        socket: String,
        /// The pin as given.
        image: String,
        /// What the engine said.
        detail: String,
        /// The command that carries the image there.
        load: String,
    },
    /// The machine's engine did not answer while the image was checked.
    #[error(
        "machine `{machine}`: the Docker engine at unix://{socket} could not be asked about the suite image: {why}; nothing was run — check the engine there (`docker version`), then re-probe docker-oci"
    )]
    EngineUnreachable {
        /// The machine id.
        machine: String,
        /// The engine's socket on the machine.
        socket: String,
        /// What failed.
        why: String,
    },
}

impl crate::error::Refusal for ContainerError {
    fn name(&self) -> &'static str {
        match self {
            ContainerError::ImageMissing => "container-image-missing",
            ContainerError::ImageTag { .. } => "container-image-tag",
            ContainerError::ImagePinMalformed { .. } => "container-image-pin-malformed",
            ContainerError::ImageAbsent { .. } => "container-image-absent",
            ContainerError::EngineUnreachable { .. } => "container-engine-unreachable",
        }
    }
}

/// Parse the operator's suite image pin (`--image`): the forms of [`Pin`];
/// the zero digest counts as malformed (it names no image).
///
/// Errors: `container-image-tag`, `container-image-pin-malformed`.
pub fn parse_image(image: &str) -> Result<Pin, ContainerError> {
    Pin::parse(image, "--image").map_err(|e| match e {
        DockerError::PinIsTag { .. } => ContainerError::ImageTag {
            image: image.to_string(),
        },
        DockerError::Unpinned { .. } => ContainerError::ImagePinMalformed {
            image: image.to_string(),
            why: "the all-zero digest names no image".into(),
        },
        DockerError::PinMalformed { why, .. } => ContainerError::ImagePinMalformed {
            image: image.to_string(),
            why,
        },
        DockerError::ContainerCapabilityAbsent { .. } => unreachable!("Pin::parse never gates"),
    })
}

/// The suite image as found on a machine's engine.
#[derive(Debug, Clone)]
pub struct SuiteImage {
    /// The pin as the operator gave it.
    pub pin: Pin,
    /// The engine's image ID (`sha256:<64 hex>`): containers are made from it.
    pub image_id: String,
    /// The API version negotiated with the engine (e.g. `1.41`).
    pub api_version: String,
}

/// Where the image comes from when the machine lacks it: for a local image
/// ID, `docker save` here piped into `docker load` there (`ssh_prefix` is
/// `ssh -F <config> <host>` for an SSH machine, `None` for this one); for a
/// registry digest, a pull of that exact digest on the machine.
pub fn load_route(pin: &Pin, ssh_prefix: Option<&str>) -> String {
    match (pin, ssh_prefix) {
        (Pin::ImageId(id), Some(ssh)) => format!("docker save {id} | {ssh} docker load"),
        (Pin::ImageId(id), None) => format!(
            "docker load -i IMAGE.tar   # a `docker save {id}` taken where the image was built"
        ),
        (Pin::Registry { .. }, Some(ssh)) => format!("{ssh} docker pull {}", pin.reference()),
        (Pin::Registry { .. }, None) => format!("docker pull {}", pin.reference()),
    }
}

/// Check the suite image on the engine at `socket`: inspect it by its pin
/// and compare the field the pin's kind names. Never pulls.
///
/// Errors: `container-image-absent` (with `load`, the route from
/// [`load_route`]), `container-engine-unreachable`.
pub async fn resolve_image(
    transport: &Transport,
    machine: &str,
    socket: &str,
    pin: &Pin,
    load: String,
) -> Result<SuiteImage, ContainerError> {
    let unreachable = |why: String| ContainerError::EngineUnreachable {
        machine: machine.to_string(),
        socket: socket.to_string(),
        why,
    };
    let docker = connect(transport, socket, CLEANUP_BUDGET)
        .await
        .map_err(unreachable)?;
    let reference = pin.reference();
    let absent = |detail: String| ContainerError::ImageAbsent {
        machine: machine.to_string(),
        socket: socket.to_string(),
        image: reference.clone(),
        detail,
        load: load.clone(),
    };
    let image = match tokio::time::timeout(CLEANUP_BUDGET, docker.inspect_image(&reference)).await {
        Err(_) => return Err(unreachable("the image inspection gave no answer".into())),
        Ok(Ok(i)) => i,
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => return Err(absent(format!("pinned by {}", pin.kind()))),
        Ok(Err(e)) => return Err(unreachable(format!("inspecting {reference} failed: {e}"))),
    };
    let id = image.id.clone().unwrap_or_default();
    let digests = image.repo_digests.clone().unwrap_or_default();
    if !pin.matches(&id, &digests) {
        return Err(absent(format!(
            "the image found is {id} with repo digests [{}], which does not carry the pin",
            digests.join(", ")
        )));
    }
    Ok(SuiteImage {
        pin: pin.clone(),
        image_id: id,
        api_version: docker.client_version().to_string(),
    })
}

/// Where and how one container-class suite runs (besides the suite itself).
#[derive(Debug, Clone)]
pub struct Target {
    /// The machine.
    pub transport: Transport,
    /// The engine's socket on the machine.
    pub socket: String,
    /// The resolved suite image.
    pub image: SuiteImage,
    /// Give the container the engine's default network (`--network`); off
    /// (`network_mode=none`) otherwise.
    pub network: bool,
    /// `uid:gid` the suite runs as (the tree's owner, so the tree stays
    /// removable); `None` = the image's user.
    pub user: Option<String>,
    /// Labels besides the attempt's ([`LABEL_ATTEMPT`], [`LABEL_REPO`],
    /// [`LABEL_SHA`] are set by the caller here).
    pub labels: HashMap<String, String>,
    /// The container's name (unique; used to remove it over a fresh
    /// connection when the first one is gone).
    pub name: String,
    /// Build caches kept between runs: (directory on the machine, path in
    /// the container, environment variable naming it). Go's build cache is
    /// content-addressed, so a warm one changes no verdict — the host class
    /// keeps one too.
    pub caches: Vec<(String, String, String)>,
    /// Whose caches a remote machine's run uses ([`crate::seal::Trust`]:
    /// `<base>/cache/<trust>/go-build`).
    pub trust: crate::seal::Trust,
    /// Build tools' temporary directories: (path in the container,
    /// environment variable naming it), each a fresh tmpfs (`exec`, mode
    /// 1777) that lives and dies with the container ([`go_scratch`]).
    pub scratch: Vec<(String, String)>,
}

/// Where a container-class suite's Go build cache lives in the container.
pub const GO_CACHE_IN_CONTAINER: &str = "/saphan-cache/go-build";

/// Where the go command's own temporary work (`GOTMPDIR`: the packages and
/// test binaries it builds, then runs and deletes) goes in the container: a
/// tmpfs, not the image's `/tmp` — writes into the container's root file
/// system pass through the engine's storage driver (fuse-overlayfs on the
/// lab engine: ~0.8 s of a 3 s `go test ./...` of eight packages, and
/// more work for the removal). The suite's own temporary directory
/// (`TMPDIR`, `os.TempDir`) stays the image's.
pub const GO_TMP_IN_CONTAINER: &str = "/saphan-cache/go-tmp";

/// The tmpfs every container-class suite gets for the go command's work
/// ([`GO_TMP_IN_CONTAINER`], named by `GOTMPDIR`), as [`Target::scratch`]
/// lists it. Like the Go build cache it changes no verdict.
pub fn go_scratch() -> Vec<(String, String)> {
    vec![(GO_TMP_IN_CONTAINER.to_string(), "GOTMPDIR".to_string())]
}

/// One suite run in a container.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// argv of the suite (no shell).
    pub argv: &'a [String],
    /// The tree on the machine: bind-mounted at this same path, working
    /// directory.
    pub tree: &'a str,
    /// Environment saphan gives the suite (besides the image's own).
    pub env: &'a [(String, String)],
    /// Extra files bind-mounted read-only at their own path (e.g. the
    /// provisions' exclude file).
    pub read_only: &'a [String],
    /// The attempt budget: start to exit.
    pub budget: Duration,
    /// The suite's stdout goes here (a local file).
    pub stdout: &'a Path,
}

/// How a container run ended.
#[derive(Debug)]
pub enum Ended {
    /// The engine reported an exit status ([`Termination::Exited`]), or the
    /// budget ran out and the container was killed ([`Termination::TimedOut`]).
    Finished {
        /// How it ended.
        status: Termination,
        /// The last [`STDERR_TAIL`] bytes of its stderr.
        stderr: Vec<u8>,
    },
    /// Ctrl-C stopped the run; the container was killed and removed (what
    /// happened, for the note).
    Interrupted(String),
    /// Nothing trustworthy from the engine (it refused, lost the run, or
    /// could not remove the container): a failed measurement of kind
    /// `engine`, with what happened.
    Engine(String),
    /// The machine's SSH connection was declared dead mid-run (its
    /// keep-alive limit, [`crate::transport::ssh::keepalive`]): a failed
    /// measurement of kind `connection-lost`, with what happened (the
    /// container may still run there: the next run to that engine removes
    /// it, [`reap_over`]).
    ConnectionLost(String),
}

/// The outcome of [`run`]: how it ended, and the wall time from start to end.
#[derive(Debug)]
pub struct Outcome {
    /// How it ended.
    pub ended: Ended,
    /// Start to exit (or to the kill).
    pub elapsed: Duration,
    /// The image's toolchain volumes the suite ran with (read-only).
    pub toolchain: Vec<toolchain::ToolchainMount>,
}

/// Run the suite `run` in a container on `target`, and remove the container
/// whatever happened.
///
/// Never an error: a suite that exits is [`Ended::Finished`] with its
/// status (a non-zero status is the suite's red, judged by the caller);
/// the budget kills and removes the container ([`Termination::TimedOut`]);
/// Ctrl-C kills and removes it ([`Ended::Interrupted`]); an engine that
/// refuses to create or start it, a wait without a status or a connection
/// lost mid-run are failed measurements ([`Ended::Engine`]), never an exit
/// code.
pub async fn run(target: &Target, run: &Run<'_>, interrupt: &Interrupt) -> Outcome {
    let t0 = Instant::now();
    let mut idle: Option<Docker> = None;
    let mut seeding = Duration::ZERO;
    let mut toolchain = Vec::new();
    let work = run_inner(target, run, &t0, &mut seeding, &mut toolchain, &mut idle);
    let ended = tokio::select! {
        e = work => e,
        _ = interrupt.cancelled() => Ended::Interrupted(
            "the operator pressed Ctrl-C; the suite's container was killed and removed".into(),
        ),
    };
    // The suite's time excludes the toolchain volumes' one-time fill.
    let elapsed = t0.elapsed().saturating_sub(seeding);
    // A forwarded socket cannot tell a dead SSH connection from an engine
    // that hung up: the transport can.
    let ended = match ended {
        Ended::Engine(n) => match target.transport.connection_gone().await {
            Some(why) => Ended::ConnectionLost(format!("{why}; {n}")),
            None => Ended::Engine(n),
        },
        e => e,
    };
    // The container is removed on every path, by its name: over the run's
    // connection when the run ended with no request in flight on it (saves
    // a connect and version handshake per run, an SSH channel remotely),
    // else over a fresh one (the run's may be gone with the future above).
    let ended = match remove_container(
        &target.transport,
        &target.socket,
        idle.as_ref(),
        &target.name,
        cleanup_deadline(),
    )
    .await
    {
        Ok(()) => {
            phase("removed", &t0);
            ended
        }
        Err(why) => {
            tracing::warn!(container = %target.name, error = %why, "suite container not removed");
            let note = format!(
                "the container `{}` could not be removed ({why}); remove it on the machine: docker rm -f {}",
                target.name, target.name
            );
            match ended {
                Ended::Interrupted(n) => Ended::Interrupted(format!("{n}; {note}")),
                Ended::Engine(n) => Ended::Engine(format!("{n}; {note}")),
                Ended::ConnectionLost(n) => Ended::ConnectionLost(format!("{n}; {note}")),
                Ended::Finished {
                    status: Termination::TimedOut,
                    ..
                } => Ended::Engine(format!("the suite ran past its budget and {note}")),
                Ended::Finished { .. } => Ended::Engine(note),
            }
        }
    };
    Outcome {
        ended,
        elapsed,
        toolchain,
    }
}

/// A debug event `container phase` naming how far a container run got and
/// the milliseconds since it began (`benches/container.rs` prints them).
fn phase(name: &'static str, t0: &Instant) {
    tracing::debug!(
        target: "saphan::container_phase",
        phase = name,
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "container phase"
    );
}

/// The run itself; `seeding` gets the time the image's toolchain volumes
/// took ([`toolchain::mounts`]: a fill, once per image and engine), which
/// the suite's budget does not pay; `used` the toolchain volumes the suite
/// ran with; `idle` gets the connection back when
/// the run ended with no request in flight on it (so the removal may reuse
/// it).
async fn run_inner(
    target: &Target,
    run: &Run<'_>,
    t0: &Instant,
    seeding: &mut Duration,
    used: &mut Vec<toolchain::ToolchainMount>,
    idle: &mut Option<Docker>,
) -> Ended {
    let engine_fail = Ended::Engine;
    let docker = match connect(
        &target.transport,
        &target.socket,
        run.budget + REQUEST_SLACK,
    )
    .await
    {
        Ok(d) => d,
        Err(why) => return engine_fail(why),
    };
    phase("connected", t0);
    let before = t0.elapsed();
    let mut taken: Vec<&str> = vec![run.tree];
    taken.extend(run.read_only.iter().map(String::as_str));
    taken.extend(target.caches.iter().map(|(_, inside, _)| inside.as_str()));
    taken.extend(target.scratch.iter().map(|(inside, _)| inside.as_str()));
    let mut toolchain =
        toolchain::mounts(&docker, &target.image.image_id, &target.labels, &taken).await;
    *seeding = t0.elapsed().saturating_sub(before);
    phase("toolchain", t0);
    let mut binds = vec![format!("{0}:{0}", run.tree)];
    binds.extend(run.read_only.iter().map(|p| format!("{p}:{p}:ro")));
    let mut env: Vec<String> = target
        .caches
        .iter()
        .map(|(_, inside, var)| format!("{var}={inside}"))
        .collect();
    binds.extend(
        target
            .caches
            .iter()
            .map(|(dir, inside, _)| format!("{dir}:{inside}")),
    );
    env.extend(
        target
            .scratch
            .iter()
            .map(|(inside, var)| format!("{var}={inside}")),
    );
    env.extend(run.env.iter().map(|(k, v)| format!("{k}={v}")));
    // The engine mounts a tmpfs `noexec,nosuid,nodev` unless told: the go
    // command runs the test binaries it builds there.
    let tmpfs: HashMap<String, String> = target
        .scratch
        .iter()
        .map(|(inside, _)| (inside.clone(), "exec,mode=1777".to_string()))
        .collect();
    let body = ContainerCreateBody {
        image: Some(target.image.image_id.clone()),
        cmd: Some(run.argv.to_vec()),
        // The suite's argv is the whole command: the image's entrypoint
        // does not wrap it.
        entrypoint: Some(Vec::new()),
        working_dir: Some(run.tree.to_string()),
        env: Some(env),
        user: target.user.clone(),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        open_stdin: Some(false),
        network_disabled: Some(!target.network),
        labels: Some(target.labels.clone()),
        host_config: Some(HostConfig {
            binds: Some(binds),
            tmpfs: (!tmpfs.is_empty()).then_some(tmpfs),
            mounts: (!toolchain.is_empty()).then(|| {
                toolchain
                    .iter()
                    .map(toolchain::ToolchainMount::to_mount)
                    .collect()
            }),
            // Off unless asked; asked, the engine's default network.
            network_mode: (!target.network).then(|| "none".to_string()),
            security_opt: Some(vec!["no-new-privileges".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    // With the toolchain volumes first; should the engine refuse to create
    // or start the container with them, once more without (they are a
    // speed-up, never a reason to fail).
    let again = (!toolchain.is_empty()).then(|| body.clone());
    let mut started = create_and_start(&docker, &target.name, body, t0).await;
    if let (Err(failed), Some(mut body)) = (&started, again) {
        tracing::warn!(error = %failed, "the suite container did not start with the toolchain volumes; again without them");
        if let Err(why) = remove_container(
            &target.transport,
            &target.socket,
            Some(&docker),
            &target.name,
            cleanup_deadline(),
        )
        .await
        {
            return engine_fail(format!("{failed}; and it could not be removed: {why}"));
        }
        toolchain.clear();
        if let Some(h) = body.host_config.as_mut() {
            h.mounts = None;
        }
        started = create_and_start(&docker, &target.name, body, t0).await;
    }
    if let Err(failed) = started {
        return engine_fail(failed);
    }
    *used = toolchain;
    phase("started", t0);
    let left = run
        .budget
        .saturating_sub(t0.elapsed().saturating_sub(*seeding));
    let code = match tokio::time::timeout(left, wait_status(&docker, &target.name)).await {
        // The budget: the caller's removal (forced) kills the container; a
        // removal that cannot be confirmed turns this into a failed
        // measurement, since the machine's state is then unknown.
        Err(_) => {
            return Ended::Finished {
                status: Termination::TimedOut,
                stderr: Vec::new(),
            };
        }
        Ok(Err(why)) => return engine_fail(why),
        Ok(Ok(code)) => code,
    };
    phase("exited", t0);
    let logs = match read_logs(&docker, &target.name, STDERR_TAIL, Some(run.stdout)).await {
        Ok(l) => l,
        Err(why) => return engine_fail(why),
    };
    phase("logs-read", t0);
    let status = match i32::try_from(code) {
        Ok(c) => Termination::Exited(c),
        Err(_) => return engine_fail(format!("the engine reported exit status {code}")),
    };
    *idle = Some(docker);
    Ended::Finished {
        status,
        stderr: logs.stderr,
    }
}

/// Create the suite container `name` from `body` and start it; `Err` says
/// which the engine refused.
async fn create_and_start(
    docker: &Docker,
    name: &str,
    body: ContainerCreateBody,
    t0: &Instant,
) -> Result<(), String> {
    let opts = CreateContainerOptions {
        name: Some(name.to_string()),
        ..Default::default()
    };
    docker
        .create_container(Some(opts), body)
        .await
        .map_err(|e| format!("the engine refused to create the suite container: {e}"))?;
    phase("created", t0);
    docker
        .start_container(name, None)
        .await
        .map_err(|e| format!("the engine refused to start the suite container: {e}"))
}

/// The container class as the measurement core's
/// [`Executor`](crate::executor::Executor): the core's command (argv, the
/// tree as working directory, environment, budget, stdout file) becomes a
/// container [`run`] on the engine of the machine whose transport the core
/// passes (this machine for `certify --class container` without
/// `--machine`; a fleet machine's, forwarded over SSH, once dispatch calls
/// it through the same seam). The run is its own task, so that when the core stops
/// waiting (Ctrl-C) the container is still killed and removed; [`settle`]
/// waits for that before the tree is removed.
///
/// [`settle`]: LocalExecutor::settle
#[derive(Debug)]
pub struct LocalExecutor {
    target: Target,
    interrupt: Interrupt,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    notes: std::sync::Mutex<Vec<String>>,
}

impl LocalExecutor {
    /// An executor for one attempt on `target`; `interrupt` is the
    /// process's Ctrl-C watch.
    pub fn new(target: Target, interrupt: Interrupt) -> LocalExecutor {
        LocalExecutor {
            target,
            interrupt,
            tasks: Default::default(),
            notes: Default::default(),
        }
    }
    /// Where the suite runs.
    pub fn target(&self) -> &Target {
        &self.target
    }
    /// Wait (bounded) until every container run of this executor (one per
    /// machine it ran on), and so its removal, is over.
    pub async fn settle(&self) {
        let tasks = self
            .tasks
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        let bound = CLEANUP_BUDGET * 3;
        if tokio::time::timeout(bound, futures_util::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!(container = %self.target.name, "container removal still running");
        }
    }
}

/// What ran the suite: the pin as given, its kind, the image ID it
/// resolved to, the engine's API version, the socket spoken to, whether
/// the container had a network, and the container's name.
fn target_container_run(t: &Target) -> crate::record::ContainerRun {
    crate::record::ContainerRun {
        container: t.name.clone(),
        docker_api_version: t.image.api_version.clone(),
        docker_socket: t.socket.clone(),
        image_id: t.image.image_id.clone(),
        image_pin: t.image.pin.reference(),
        image_pin_kind: t.image.pin.kind().to_string(),
        network: t.network,
        // Filled from the machine's docker-oci row where the record is
        // built (measure::pipeline::record_of).
        engine_path: None,
        engine_version: None,
    }
}

/// The boxed future an [`crate::executor::Executor`] returns.
type ExecFuture<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = std::result::Result<crate::exec::Output, crate::transport::TransportError>,
            > + Send
            + 'a,
    >,
>;

impl crate::executor::Executor for LocalExecutor {
    fn class(&self) -> &'static str {
        "container"
    }
    /// What ran the suite: the pin as given, its kind, the image ID it
    /// resolved to, the engine's API version, the socket spoken to, whether
    /// the container had a network, and the container's name.
    fn container_run(&self) -> Option<crate::record::ContainerRun> {
        Some(target_container_run(&self.target))
    }
    fn execute<'a>(&'a self, transport: &'a Transport, cmd: crate::exec::Cmd) -> ExecFuture<'a> {
        self.execute_on(self.target.clone(), transport, cmd, &self.notes)
    }
    /// The containers of finished attempts this run removed first
    /// ([`reap_over`]).
    fn take_notes(&self) -> Vec<String> {
        take(&self.notes)
    }
    fn settle<'s>(
        &'s self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 's>> {
        Box::pin(LocalExecutor::settle(self))
    }
    /// The container is named `saphan-suite-<attempt>-<machine>` and labelled
    /// [`LABEL_MACHINE`]`=<machine>`; its run is settled by this executor.
    fn for_machine<'s>(&'s self, machine: &str) -> Box<dyn crate::executor::Executor + 's> {
        let mut target = self.target.clone();
        let attempt = target
            .labels
            .get(LABEL_ATTEMPT)
            .cloned()
            .unwrap_or_default();
        target.name = container_name(&attempt, machine);
        target
            .labels
            .insert(LABEL_MACHINE.to_string(), machine.to_string());
        Box::new(OnMachine {
            base: self,
            target,
            notes: Default::default(),
        })
    }
}

fn take(notes: &std::sync::Mutex<Vec<String>>) -> Vec<String> {
    notes
        .lock()
        .map(|mut n| std::mem::take(&mut *n))
        .unwrap_or_default()
}

/// A [`LocalExecutor`] for one machine of the invocation
/// ([`crate::executor::Executor::for_machine`]).
struct OnMachine<'a> {
    base: &'a LocalExecutor,
    target: Target,
    notes: std::sync::Mutex<Vec<String>>,
}

impl crate::executor::Executor for OnMachine<'_> {
    fn class(&self) -> &'static str {
        "container"
    }
    /// What ran the suite: the pin as given, its kind, the image ID it
    /// resolved to, the engine's API version, the socket spoken to, whether
    /// the container had a network, and the container's name.
    fn container_run(&self) -> Option<crate::record::ContainerRun> {
        Some(target_container_run(&self.target))
    }
    fn execute<'a>(&'a self, transport: &'a Transport, cmd: crate::exec::Cmd) -> ExecFuture<'a> {
        self.base
            .execute_on(self.target.clone(), transport, cmd, &self.notes)
    }
    /// The containers of finished attempts this run removed first
    /// ([`reap_over`]).
    fn take_notes(&self) -> Vec<String> {
        take(&self.notes)
    }
    fn for_machine<'s>(&'s self, machine: &str) -> Box<dyn crate::executor::Executor + 's> {
        self.base.for_machine(machine)
    }
}

impl LocalExecutor {
    /// Run `cmd` in a container of `target` on `transport`'s machine, first
    /// removing the containers of attempts that are over on its engine
    /// ([`reap_over`], what it removed into `notes`).
    fn execute_on<'a>(
        &'a self,
        target: Target,
        transport: &'a Transport,
        cmd: crate::exec::Cmd,
        notes: &'a std::sync::Mutex<Vec<String>>,
    ) -> ExecFuture<'a> {
        Box::pin(async move {
            let engine = |detail: String| crate::transport::TransportError::Engine { detail };
            let mut argv = vec![cmd.program().to_string_lossy().into_owned()];
            argv.extend(
                cmd.argv_tail()
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            );
            let Some(tree) = cmd.working_dir().map(|p| p.display().to_string()) else {
                return Err(engine("the suite has no tree to mount".into()));
            };
            let crate::exec::Sink::File(stdout) = cmd.sink().clone() else {
                return Err(engine("the suite's stdout has no file".into()));
            };
            let env: Vec<(String, String)> = cmd
                .env_changes()
                .iter()
                .filter_map(|(k, v)| {
                    v.as_ref().map(|v| {
                        (
                            k.to_string_lossy().into_owned(),
                            v.to_string_lossy().into_owned(),
                        )
                    })
                })
                .collect();
            // git in the suite sees what it sees on the host class: the
            // tree's git dir and the repository's common dir (objects,
            // refs) are mounted read-only at their own paths, and so is the
            // provisions' exclude file (`core.excludesFile` of the
            // GIT_CONFIG_* variables, which reach the container's
            // environment as they are) — a file on the tree's machine, so
            // it is named by its key, never checked here.
            // The engine's leftovers of finished attempts are removed
            // ([`reap_over`]) while git is asked.
            let (mut read_only, reaped) = tokio::join!(
                git_dirs(transport, &tree),
                reap_over(transport, &target.socket)
            );
            if let Ok(mut n) = notes.lock() {
                n.extend(reaped);
            }
            read_only.extend(excludes_files(&env));
            read_only.sort();
            read_only.dedup();
            let budget = cmd
                .budget()
                .unwrap_or(crate::executor::DEFAULT_SUITE_TIMEOUT);
            // The engine is the one on the tree's machine (a dispatched
            // run passes the fleet machine's transport; bollard speaks to
            // its socket forwarded through that transport).
            let mut target = target;
            target.transport = transport.clone();
            // A fleet machine's suite keeps its Go build cache under the
            // machine's workhome, as this machine's keeps one under
            // SAPHAN_HOME (the local target names its own).
            let cache = if target.caches.is_empty() {
                crate::home::Layout::of_tree(&tree).map(|l| l.go_cache(target.trust))
            } else {
                None
            };
            if let Transport::Ssh(_) = transport {
                // The caches are this host's directories; the suite runs as
                // the owner of the shipped tree (the machine's SSH user),
                // who creates the machine's cache directory first.
                target.caches.clear();
                target.user = Some(remote_user(transport, cache.as_deref()).await?);
            } else if let Some(c) = &cache {
                tokio::fs::create_dir_all(c)
                    .await
                    .map_err(|e| engine(format!("could not create the Go build cache {c}: {e}")))?;
            }
            if let Some(c) = cache {
                target.caches = vec![(c, GO_CACHE_IN_CONTAINER.to_string(), "GOCACHE".to_string())];
            }
            if let Some(c) = controller_id() {
                target
                    .labels
                    .insert(LABEL_CONTROLLER.to_string(), c.to_string());
            }
            let interrupt = self.interrupt.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(async move {
                let r = Run {
                    argv: &argv,
                    tree: &tree,
                    env: &env,
                    read_only: &read_only,
                    budget,
                    stdout: &stdout,
                };
                let _ = tx.send(run(&target, &r, &interrupt).await);
            });
            if let Ok(mut t) = self.tasks.lock() {
                t.push(task);
            }
            let Ok(o) = rx.await else {
                return Err(engine("the container run ended without a result".into()));
            };
            if !o.toolchain.is_empty()
                && let Ok(mut n) = notes.lock()
            {
                let list: Vec<String> = o
                    .toolchain
                    .iter()
                    .map(|m| format!("{} ({})", m.path, m.volume))
                    .collect();
                n.push(format!(
                    "the image's Go toolchain was read from read-only copies on engine volumes: {}",
                    list.join(", ")
                ));
            }
            match o.ended {
                Ended::Finished { status, stderr } => Ok(crate::exec::Output {
                    status,
                    stdout: Vec::new(),
                    stderr,
                    elapsed: o.elapsed,
                }),
                // Ctrl-C: the core's own interrupt branch records it.
                Ended::Interrupted(_) => std::future::pending().await,
                Ended::Engine(note) => Err(engine(note)),
                Ended::ConnectionLost(detail) => {
                    Err(crate::transport::TransportError::ConnectionLost {
                        alias: match transport {
                            Transport::Ssh(s) => s.settings().alias.clone(),
                            Transport::Local(_) => "the local machine".into(),
                            Transport::Slurm(s) => s.node().id.clone(),
                        },
                        detail,
                    })
                }
            }
        })
    }
}

/// Remove every container carrying every `label=value` of `labels` on the engine at `socket`
/// (the sweep after a dispatched container-class run: whatever the docker
/// CLI on the machine left when its process group was killed). Returns the
/// names it could not remove, with why.
pub async fn remove_labelled(
    transport: &Transport,
    socket: &str,
    labels: &[(&str, &str)],
) -> Result<(), String> {
    let docker = connect(transport, socket, CLEANUP_BUDGET).await?;
    let opts = bollard::query_parameters::ListContainersOptions {
        all: true,
        // Every label must match (the engine ANDs label filters).
        filters: Some(
            [(
                "label".to_string(),
                labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let found = tokio::time::timeout(CLEANUP_BUDGET, docker.list_containers(Some(opts)))
        .await
        .map_err(|_| "listing containers gave no answer".to_string())?
        .map_err(|e| format!("listing containers failed: {e}"))?;
    let mut left = Vec::new();
    for c in found {
        let Some(id) = c.id else { continue };
        if let Err(why) =
            remove_container(transport, socket, Some(&docker), &id, cleanup_deadline()).await
        {
            left.push(format!("{id}: {why}"));
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(left.join("; "))
    }
}

/// The values of the `GIT_CONFIG_VALUE_<n>` variables of `env` whose
/// `GIT_CONFIG_KEY_<n>` is `core.excludesFile` (git's keys are
/// case-insensitive): the provisions' exclude file.
fn excludes_files(env: &[(String, String)]) -> Vec<String> {
    env.iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("GIT_CONFIG_KEY_")?;
            v.eq_ignore_ascii_case("core.excludesFile").then_some(n)
        })
        .filter_map(|n| {
            let key = format!("GIT_CONFIG_VALUE_{n}");
            env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
        })
        .collect()
}

/// The git dir of the tree at `tree` on `transport`'s machine and its
/// repository's common dir, absolute (`git rev-parse` there); empty when
/// git there cannot say (the suite then runs without them).
async fn git_dirs(transport: &Transport, tree: &str) -> Vec<String> {
    let argv: Vec<String> = [
        "git",
        "-C",
        tree,
        "rev-parse",
        "--absolute-git-dir",
        "--git-common-dir",
    ]
    .map(String::from)
    .into();
    let Ok(o) = transport
        .exec(&argv, crate::transport::CONTROL_TIMEOUT)
        .await
    else {
        return Vec::new();
    };
    if !o.status.success() {
        return Vec::new();
    }
    o.stdout_str()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            // Older gits print the common dir relative to the tree.
            let mut p = std::path::PathBuf::new();
            for c in Path::new(tree).join(l).components() {
                match c {
                    std::path::Component::ParentDir => {
                        p.pop();
                    }
                    std::path::Component::CurDir => {}
                    c => p.push(c),
                }
            }
            p.display().to_string()
        })
        .collect()
}

/// `uid:gid` of the user `transport` runs as on its machine (who owns a
/// shipped tree there), so what the suite writes stays removable; in the
/// same call that user creates `mkdir` there when given (the suite's build
/// cache).
async fn remote_user(
    transport: &Transport,
    mkdir: Option<&str>,
) -> Result<String, crate::transport::TransportError> {
    let args: Vec<&str> = mkdir.into_iter().collect();
    let argv = crate::remote::sh_argv(crate::remote::USER_IDS, "saphan-user-ids", &args);
    let o = transport
        .exec(&argv, crate::transport::CONTROL_TIMEOUT)
        .await?;
    let u = o.stdout_str().trim().to_string();
    if !o.status.success() || u.split(':').any(|x| x.parse::<u32>().is_err()) {
        return Err(crate::transport::TransportError::Engine {
            detail: format!(
                "`id -u` / `id -g` on the machine gave no uid:gid ({u:?}): {}",
                o.stderr_str().trim()
            ),
        });
    }
    Ok(u)
}

/// Containers of one attempt that may remain on a machine's engine after
/// its sweep (the sweep could not remove them): what the operator reads,
/// rendered by the CLI as `saphan: warning: <Display>`.
#[derive(Debug, Clone)]
pub struct ContainersRemain {
    /// The attempt id (the [`LABEL_ATTEMPT`] label's value).
    pub attempt: String,
    /// The machine id (the [`LABEL_MACHINE`] label's value).
    pub machine: String,
    /// Why they may remain (the connection or the engine's words).
    pub why: String,
}

impl std::fmt::Display for ContainersRemain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (attempt, machine, why) = (&self.attempt, &self.machine, &self.why);
        write!(
            f,
            "containers labelled {LABEL_ATTEMPT}={attempt} {LABEL_MACHINE}={machine} may remain on {machine} ({why}); remove them there: docker rm -f $(docker ps -aq --filter label={LABEL_ATTEMPT}={attempt} --filter label={LABEL_MACHINE}={machine})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

    #[test]
    fn an_attempt_is_over_when_its_saphan_is_gone_on_this_host() {
        let Some(me) = controller_id() else {
            return; // no /proc here
        };
        assert_eq!(attempt_over(me), None, "this process lives");
        let parts: Vec<&str> = me.split('/').collect();
        let (host, boot) = (parts[0], parts[1]);
        // A child that has ended and been waited for: its pid names no process.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        let why = attempt_over(&format!("{host}/{boot}/{pid}/1")).unwrap();
        assert!(why.contains(&format!("process {pid} is gone")), "{why}");
        // The same pid with another start time is a reused pid: over.
        let me_pid = std::process::id();
        assert!(attempt_over(&format!("{host}/{boot}/{me_pid}/1")).is_some());
        // Another boot of this host: over; another host: not ours to judge.
        assert!(attempt_over(&format!("{host}/other-boot/{me_pid}/1")).is_some());
        assert_eq!(attempt_over(&format!("other-host/{boot}/{pid}/1")), None);
        assert_eq!(attempt_over("garbage"), None);
    }

    #[test]
    fn the_exclude_file_is_found_by_its_key() {
        let env: Vec<(String, String)> = [
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "/not/a/mount"),
            ("GIT_CONFIG_KEY_1", "core.excludesfile"),
            ("GIT_CONFIG_VALUE_1", "/m/worktrees/t/saphan-exclude"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        assert_eq!(excludes_files(&env), ["/m/worktrees/t/saphan-exclude"]);
    }

    #[test]
    fn image_pins_refuse_by_name() {
        let h = "c6838e578d8c74290795d47c46e42f1005d6d67b210a781407bf6cc775447a1c";
        assert!(parse_image(&format!("sha256:{h}")).is_ok());
        assert_eq!(
            parse_image("busybox:latest").unwrap_err().name(),
            "container-image-tag"
        );
        assert_eq!(
            parse_image(&format!("sha256:{}", "0".repeat(64)))
                .unwrap_err()
                .name(),
            "container-image-pin-malformed"
        );
        let p = parse_image(&format!("sha256:{h}")).unwrap();
        assert_eq!(
            load_route(&p, Some("ssh -F /h/ssh/config m0")),
            format!("docker save sha256:{h} | ssh -F /h/ssh/config m0 docker load")
        );
    }
}
