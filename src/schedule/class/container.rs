//! The container class: the suite runs in a container made from the
//! operator's pinned suite image (`--image`), on this machine's Docker
//! engine or on each fleet machine's, never pulled. A machine is admitted
//! by its fresh docker-oci row (the container-class gate) and its engine
//! holding the pinned image; every container of the attempt is removed
//! afterwards ([`Finish`]).

use super::{Benches, ExecutionClass, Finish, Placement, Placing, Step};
use crate::docker::container::{self, ContainerError};
use crate::error::Result;
use crate::home::Home;
use crate::measure::pipeline::Class;
use crate::schedule::invocation::Certified;
use crate::suite::ResolvedSuite;
use crate::transport::Transport;

/// The container class (module docs).
pub struct ContainerClass;

impl ExecutionClass for ContainerClass {
    fn name(&self) -> &'static str {
        "container"
    }

    fn claims(&self, class: Class, _machines: &[String]) -> bool {
        class == Class::Container
    }

    fn splits(&self) -> bool {
        false
    }

    fn place<'a>(
        &'a self,
        p: &'a Placing<'a>,
        suite: &'a mut ResolvedSuite,
    ) -> Step<'a, Result<Placement>> {
        Box::pin(place(p, suite))
    }
}

async fn place(p: &Placing<'_>, suite: &mut ResolvedSuite) -> Result<Placement> {
    // The suite image pin is operator input: refused before anything.
    let pin = match p.image {
        None => return Err(ContainerError::ImageMissing.into()),
        Some(i) => container::parse_image(i)?,
    };
    // Container-class runs need proof that each machine can run the
    // pinned probe image, before anything else happens there: for fleet
    // machines `dispatch::admit::admit_all_container` asks every machine's
    // docker-oci row and names every refusal at once; here, this machine's.
    if p.machines.is_empty() {
        let now = time::OffsetDateTime::now_utc();
        crate::fleet::docker_probes::require_container_capability(p.home, p.catalog, "local", now)?;
    }
    if suite.source == crate::suite::SuiteSource::DefaultGo {
        // In a container, default-go's `go` is the image's, on its PATH.
        suite.argv[0] = "go".into();
    }
    // Whose caches: named here for every machine of the invocation.
    let trust = crate::measure::trust_of(p.repo, p.sha, p.trunk).await;
    let local = || Transport::Local(crate::transport::Local);
    if !p.machines.is_empty() {
        let c =
            crate::dispatch::admit::admit_all_container(p.home, p.catalog, p.machines, suite, pin)
                .await?;
        // One container executor for every machine: bollard speaks to
        // each machine's engine over its socket, forwarded through the
        // machine's transport; each machine's container is its own
        // (named and labelled after the machine).
        let executor = container::LocalExecutor::new(
            target(
                p,
                local(),
                c.socket.clone(),
                c.image.clone(),
                None,
                Vec::new(),
                trust,
            ),
            p.interrupt.clone(),
        );
        return Ok(Placement {
            benches: Benches::Machines {
                admitted: c.admitted.clone(),
                chosen: false,
            },
            executor: Box::new(executor),
            trust: Some(trust),
            finish: Some(Box::new(Sweep {
                admitted: c,
                home: p.home.clone(),
                attempt: p.attempt.to_string(),
            })),
        });
    }
    // The suite image must be on the engine already: nothing is pulled,
    // and an absent image is refused before any worktree exists.
    let socket = crate::docker::socket_of(p.catalog.get(crate::docker::DOCKER_OCI)?);
    let load = container::load_route(&pin, None);
    let image = container::resolve_image(&local(), "local", &socket, &pin, load).await?;
    // The container's Go build cache, kept between runs like the host's
    // own (content-addressed: it speeds builds, never changes a verdict).
    let dir = p.home.cache(trust).join("go-build");
    std::fs::create_dir_all(&dir).map_err(|source| crate::error::IoError::Io {
        action: "create the container Go build cache",
        path: dir.clone(),
        source,
    })?;
    let caches = vec![(
        dir.display().to_string(),
        container::GO_CACHE_IN_CONTAINER.to_string(),
        "GOCACHE".to_string(),
    )];
    let user = format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid());
    let executor = container::LocalExecutor::new(
        target(p, local(), socket, image, Some(user), caches, trust),
        p.interrupt.clone(),
    );
    Ok(Placement {
        benches: Benches::Here,
        executor: Box::new(executor),
        trust: Some(trust),
        finish: None,
    })
}

/// Where one container-class attempt runs: the attempt's labels
/// (`saphan.attempt`, `saphan.machine`, `saphan.repo`, `saphan.sha`) and its
/// container name `saphan-suite-<attempt>-local`; on fleet machines
/// [`crate::executor::Executor::for_machine`] names and labels it after each
/// machine.
fn target(
    p: &Placing<'_>,
    transport: Transport,
    socket: String,
    image: container::SuiteImage,
    user: Option<String>,
    caches: Vec<(String, String, String)>,
    trust: crate::seal::Trust,
) -> container::Target {
    container::Target {
        transport,
        socket,
        image,
        network: p.network,
        user,
        labels: [
            (container::LABEL_ATTEMPT, p.attempt.to_string()),
            (container::LABEL_MACHINE, "local".to_string()),
            (container::LABEL_REPO, p.repo.top.display().to_string()),
            (container::LABEL_SHA, p.sha.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        name: container::container_name(p.attempt, "local"),
        caches,
        trust,
        scratch: container::go_scratch(),
    }
}

/// Whatever happened, no container of this attempt stays on a machine.
struct Sweep {
    admitted: crate::dispatch::admit::ContainerAdmitted,
    home: Home,
    attempt: String,
}

impl Finish for Sweep {
    fn finish<'s>(self: Box<Self>, out: &'s mut Result<Certified>) -> Step<'s, ()> {
        Box::pin(async move {
            let remain = self.admitted.sweep(&self.home, &self.attempt).await;
            match out {
                Ok(Certified::Machines(m)) => m.remain = remain,
                _ => {
                    for r in &remain {
                        tracing::warn!("{r}");
                    }
                }
            }
        })
    }
}
