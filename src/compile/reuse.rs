//! What serves a unit without compiling it under its own op namespace: the local object cache
//! (as is, once its preprocessor says the object does not depend on the id; with the new
//! namespace re-applied, from the copy kept for its length or after a probe compile learned
//! where the old one lies), then the remote cache.

use std::path::Path;
use std::time::SystemTime;

use super::cache::{self, Argv, Cache, Freshness, Manifest};
use super::command::command_for;
use super::error::{CompileError, io_error};
use super::gate::run_gated;
use super::namespace::{self, Patchability};
use super::namespace_use::preprocessed_holds;
use super::nvcc::StepCache;
use super::remote::{Lookup, RemoteCache, RemoteKey};
use super::runner::{TempOutputs, launched};
use super::settings::CompileSettings;
use crate::plan::CompileJob;
use crate::process::Cancel;
use crate::report::Reporter;
use crate::schedule::{JobError, RunChoice};

/// What serves the compiles of one build beside the compiler: this work directory's object
/// cache, the shared remote one, and sccache when units go to sccache-dist's servers.
pub(super) struct Caches<'a> {
    pub(super) local: &'a Cache,
    /// nvcc's device passes (when CUDA units run as nvcc's steps).
    pub(super) steps: Option<&'a StepCache>,
    pub(super) remote: Option<&'a RemoteCache>,
    pub(super) dist: Option<&'a Path>,
}

/// One unit as the caches see it, and how its compilers run.
pub(super) struct Serving<'s, 'a> {
    pub(super) job: &'s CompileJob,
    /// How the unit runs, as the schedule chose.
    pub(super) run: &'s RunChoice,
    pub(super) caches: &'s Caches<'a>,
    pub(super) argv: &'s Argv,
    pub(super) launcher: Option<&'s Path>,
    pub(super) settings: &'s CompileSettings,
    pub(super) reporter: &'s dyn Reporter,
    pub(super) cancel: &'s Cancel,
}

/// Whether the unit needs its compiler.
pub(super) enum Reuse<'a> {
    /// No compiler ran.
    Done,
    /// A probe compile ran, then the op namespace was re-applied: no other compile is needed.
    Probed,
    /// Compile, then share the object under this remote key; `known`: whether the new object
    /// can be re-applied, as a probe of the old one found (the code is the same).
    Compile {
        remote: Option<(&'a RemoteCache, RemoteKey)>,
        known: Option<Patchability>,
    },
}

/// What a probe came to.
enum Probed {
    Reapplied,
    /// Compile under the new id; with what the probe found, when it found it not patchable.
    Compile(Option<Patchability>),
}

pub(super) fn reuse<'a>(cx: &Serving<'_, 'a>) -> Result<Reuse<'a>, JobError<CompileError>> {
    let (job, local, reporter) = (cx.job, cx.caches.local, cx.reporter);
    let mut fresh = local.check(job, cx.argv);
    if let Freshness::CheckUse { from, to } = &fresh {
        fresh = check_use(cx, from, to)?;
    }
    let (fresh, via) = match fresh {
        Freshness::Stale(why) => from_copy(cx, why),
        fresh => (fresh, String::new()),
    };
    match fresh {
        Freshness::Fresh => {
            reporter.verbose(&format!("fresh `{}`{via}", job.label));
            return Ok(Reuse::Done);
        }
        Freshness::FreshBecause(why) => {
            reporter.verbose(&format!("fresh `{}`{via}: {why}", job.label));
            return Ok(Reuse::Done);
        }
        Freshness::Reapply { from, to } => match local.reapply(job, &from, &to) {
            Ok(manifest) => {
                reporter.verbose(&format!(
                    "reused `{}`: op namespace re-applied{via}: {from} → {to}",
                    job.label
                ));
                share(cx, &manifest);
                return Ok(Reuse::Done);
            }
            Err(e) => reporter.verbose(&format!(
                "compile `{}`: the op namespace `{to}` could not be re-applied{via}: {e}",
                job.label
            )),
        },
        Freshness::Probe { from, to } => {
            // Another checkout may have compiled it under this id already.
            let remote = remote_key(cx);
            if let Some((r, key)) = &remote
                && from_remote(cx, r, key)?
            {
                return Ok(Reuse::Done);
            }
            return Ok(match probe(cx, &from, &to, &via)? {
                Probed::Reapplied => Reuse::Probed,
                Probed::Compile(known) => Reuse::Compile { remote, known },
            });
        }
        Freshness::Stale(why) => reporter.verbose(&format!("compile `{}`: {why}", job.label)),
        Freshness::CheckUse { from, to } => reporter.verbose(&format!(
            "compile `{}`: the op namespace changed (`{from}` -> `{to}`){via} and whether the \
             object depends on it was not asked",
            job.label
        )),
    }
    let remote = remote_key(cx);
    if let Some((r, key)) = &remote
        && from_remote(cx, r, key)?
    {
        return Ok(Reuse::Done);
    }
    Ok(Reuse::Compile {
        remote,
        known: None,
    })
}

/// The object of the unit is stale (`why`): when that is because the op namespace's length
/// changed (`_dirty` came or went), keep it aside for the next id of its length, and put back
/// the copy kept for this length if it serves. What serves then, and (when the copy does) how
/// `-v` says where it came from.
fn from_copy(cx: &Serving, why: String) -> (Freshness, String) {
    let (job, local, reporter) = (cx.job, cx.caches.local, cx.reporter);
    match local.keep_copy(job, cx.argv) {
        Ok(Some(len)) => reporter.verbose(&format!(
            "`{}`: its object is kept aside for op namespaces of {len} characters",
            job.label
        )),
        Ok(None) => {}
        Err(e) => reporter.verbose(&format!("`{}`: its object is not kept: {e}", job.label)),
    }
    let Some(restored) = local.restore_copy(job, cx.argv) else {
        return (Freshness::Stale(why), String::new());
    };
    let len = cx.argv.namespace.as_ref().map_or(0, String::len);
    reporter.verbose(&format!(
        "`{}`: the copy kept for {len}-character op namespaces replaces the object, which was \
         not fresh ({why})",
        job.label
    ));
    (restored, format!(" (from the {len}-character copy)"))
}

/// Whether the object of the unit, compiled under `from`, depends on its op namespace, as its
/// preprocessor run under `to` says (recorded in its entry; an object that does not is shared
/// under the new id); then what serves the unit under `to`.
fn check_use(cx: &Serving, from: &str, to: &str) -> Result<Freshness, JobError<CompileError>> {
    let (job, local, reporter) = (cx.job, cx.caches.local, cx.reporter);
    let changed = format!("the op namespace changed (`{from}` -> `{to}`)");
    let started = SystemTime::now();
    let holds = match preprocessed_holds(job, cx.run, to, cx.settings, cx.cancel)? {
        Ok(holds) => holds,
        Err(why) => {
            let why = format!("{changed} and whether the object depends on it is not known: {why}");
            return Ok(Freshness::Stale(why));
        }
    };
    let said = match holds {
        true => "holds it",
        false => "does not hold it",
    };
    reporter.verbose(&format!(
        "`{}`: {changed}; its preprocessed source under `{to}` {said}",
        job.label
    ));
    match local.found_namespace_use(job, from, holds, started) {
        Ok(manifest) if !holds => share(cx, &manifest),
        Ok(_) => {}
        Err(e) => {
            let why = format!("{changed}; what its preprocessor saw is not recorded: {e}");
            return Ok(Freshness::Stale(why));
        }
    }
    Ok(local.check(job, cx.argv))
}

/// The entry of an object just compiled under its op namespace with whether the object depends
/// on it asked of its preprocessor (when no file or flag said so) if it is to be shared
/// (`sharing`): the remote's entry for any op namespace serves other commits only objects
/// known not to. `started`: when its compile started.
pub(super) fn checked_for_sharing(
    cx: &Serving,
    manifest: Option<Manifest>,
    sharing: bool,
    started: SystemTime,
) -> Result<Option<Manifest>, JobError<CompileError>> {
    let Some(mut m) = manifest else {
        return Ok(None);
    };
    let Some(id) = m
        .unchecked_namespace()
        .filter(|_| sharing)
        .map(str::to_string)
    else {
        return Ok(Some(m));
    };
    let (job, reporter) = (cx.job, cx.reporter);
    match preprocessed_holds(job, cx.run, &id, cx.settings, cx.cancel)? {
        // A file changed while it ran: the object may be of either version; the next build
        // compiles it again anyway.
        Ok(_) if cx.caches.local.changed_since(&m, started).is_some() => {}
        Ok(holds) => {
            let object = std::fs::read(&job.object).map_err(|e| io_error(&job.object, e))?;
            m.found_namespace_use(job.lang, holds, &object);
        }
        Err(why) => reporter.verbose(&format!(
            "`{}`: shared for its own op namespace only: {why}",
            job.label
        )),
    }
    Ok(Some(m))
}

/// The entry of an object just compiled, with what a probe of the previous object found when
/// that was not patchable ([`Reuse::Compile`]'s `known`): the code is the same.
pub(super) fn with_known(
    mut manifest: Option<Manifest>,
    known: Option<Patchability>,
) -> Option<Manifest> {
    if let (Some(m), Some(known)) = (&mut manifest, known)
        && m.wants_probe().is_some()
    {
        m.learned(known);
    }
    manifest
}

/// The remote cache and the unit's key there, when there is one.
fn remote_key<'a>(cx: &Serving<'_, 'a>) -> Option<(&'a RemoteCache, RemoteKey)> {
    let remote = cx.caches.remote?;
    Some((remote, remote.key(cx.job, &command_for(cx.job, cx.run))?))
}

/// Share an object whose op namespace was re-applied: it now carries the namespace the remote
/// key names, like a compiled one.
fn share(cx: &Serving, manifest: &Manifest) {
    if let Some(r) = cx.caches.remote
        && let Some(key) = r.key(cx.job, &command_for(cx.job, cx.run))
    {
        r.store(cx.job, &key, manifest, cx.reporter);
    }
}

/// The object in place holds `from` and its places are not known: compile the unit under a
/// probe id of `from`'s length, each varying character changed to one of another class
/// ([`namespace::probe_id`]), learn where `from` lies from the two objects
/// ([`namespace::learn`]), record it, and write `to` there. The one compile `to` would have
/// cost, and from then on every id of this length is written.
fn probe(cx: &Serving, from: &str, to: &str, via: &str) -> Result<Probed, JobError<CompileError>> {
    let (job, local, reporter) = (cx.job, cx.caches.local, cx.reporter);
    let not = |why: String| Patchability::NotPatchable { why };
    let Some(probe) = namespace::probe_id(from) else {
        let why = format!("the last word of `{from}` is too long to probe");
        reporter.verbose(&format!("compile `{}`: {why}", job.label));
        return Ok(Probed::Compile(Some(not(why))));
    };
    let started = SystemTime::now();
    let learned = match compile_probe(cx, from, to, &probe, via)? {
        Ok(probed) => probed,
        Err(why) => {
            reporter.verbose(&format!("compile `{}`: {why}", job.label));
            return Ok(Probed::Compile(None));
        }
    };
    if let Err(e) = local.learned(job, from, learned.clone(), started) {
        reporter.verbose(&format!(
            "compile `{}`: what the probe found is not recorded: {e}",
            job.label
        ));
        return Ok(Probed::Compile(None));
    }
    if let Patchability::NotPatchable { why } = &learned {
        reporter.verbose(&format!("compile `{}`: probed: {why}", job.label));
        return Ok(Probed::Compile(Some(learned)));
    }
    match local.reapply(job, from, to) {
        Ok(manifest) => {
            reporter.verbose(&format!(
                "reused `{}`: op namespace re-applied after its probe: {from} → {to}",
                job.label
            ));
            share(cx, &manifest);
            Ok(Probed::Reapplied)
        }
        Err(e) => {
            reporter.verbose(&format!(
                "compile `{}`: the op namespace `{to}` could not be re-applied after its \
                 probe: {e}",
                job.label
            ));
            Ok(Probed::Compile(None))
        }
    }
}

/// Compile the unit under `probe` beside its object (under `from`) and learn from the two
/// where `from` lies; `Err(why)` when the probe compile failed or its object cannot be read
/// (nothing learned: a compiler killed for memory says nothing about the object).
fn compile_probe(
    cx: &Serving,
    from: &str,
    to: &str,
    probe: &str,
    via: &str,
) -> Result<Result<Patchability, String>, JobError<CompileError>> {
    let job = cx.job;
    let tmp = TempOutputs::new(job);
    let defines = (job.defines.iter())
        .map(|(name, value)| match name == cache::NAMESPACE_DEFINE {
            true => (name.clone(), Some(probe.to_string())),
            false => (name.clone(), value.clone()),
        })
        .collect();
    let spec = launched(
        cx.launcher,
        command_for(
            &CompileJob {
                object: tmp.object.clone(),
                depfile: tmp.depfile.clone(),
                defines,
                ..job.clone()
            },
            cx.run,
        ),
    );
    cx.reporter.verbose(&format!(
        "probe `{}`: probe compiled under `{probe}` to learn where the op namespace lies in the \
         object of `{from}`{via}, to re-apply `{to}`: {spec}",
        job.label
    ));
    let memory = cx.settings.memory.as_deref();
    let key = memory.map(|g| g.key(&job.object, None));
    if let Err(failure) = run_gated(&spec, memory, key.as_ref(), None, cx.cancel) {
        return match CompileError::from_failure(&job.label, job.lang, failure) {
            Some(e) => Ok(Err(format!(
                "the probe compile under `{probe}` failed: {e}"
            ))),
            None => Err(JobError::Cancelled),
        };
    }
    Ok(
        match (std::fs::read(&job.object), std::fs::read(&tmp.object)) {
            (Ok(object), Ok(probed)) => Ok(namespace::learn(&object, from, &probed, probe)),
            (Err(e), _) | (_, Err(e)) => Err(format!("cannot read the probe's object: {e}")),
        },
    )
}

/// Put the remote's object for the unit in place, with its depfile and local cache entry:
/// `false` when the remote has none that fits this checkout.
fn from_remote(
    cx: &Serving,
    remote: &RemoteCache,
    key: &RemoteKey,
) -> Result<bool, JobError<CompileError>> {
    let (job, cache, reporter) = (cx.job, cx.caches.local, cx.reporter);
    let Lookup::Hit {
        object,
        deps,
        reapply,
        preprocessed_holds,
    } = remote.lookup(job, key, reporter)
    else {
        return Ok(false);
    };
    let listed: Vec<String> = (deps.iter())
        .map(|d| d.display().to_string().replace(' ', "\\ "))
        .collect();
    let depfile = format!("{}: {}\n", job.object.display(), listed.join(" \\\n  "));
    crate::files::write_atomic(&job.depfile, depfile.as_bytes())
        .map_err(|e| io_error(&job.depfile, e))?;
    crate::files::write_atomic(&job.object, &object).map_err(|e| io_error(&job.object, e))?;
    let mut manifest = cache
        .manifest(job, cx.argv, &deps, SystemTime::now())
        .map_err(|e| io_error(&job.object, e))?;
    // The pieces the compiling checkout's probe found: `reapply` checks each before writing.
    // Whether it depends on its op namespace, as the compiling checkout's preprocessor said.
    if let (Some(m), Some(holds)) = (&mut manifest, preprocessed_holds)
        && m.unchecked_namespace().is_some()
    {
        m.found_namespace_use(job.lang, holds, &object);
    }
    if let (Some(m), Some(found @ Patchability::Patchable { .. })) = (&mut manifest, reapply)
        && m.wants_probe().is_some()
    {
        m.learned(found);
    }
    cache
        .store(job, manifest.as_ref())
        .map_err(|e| io_error(&cache.manifest_path(job), e))?;
    reporter.verbose(&format!("`{}` from the remote cache", job.label));
    Ok(true)
}
