//! nvcc's split compile (issues #27, #42): kbuild's steps split `cicc` and `ptxas` (whose thread
//! count in the cubin kbuild writes back as 1) as the schedule plans, once no unit waits, for
//! the unit the build waits for, and for a `ptxas` whose PTX says it is heavy; the device code
//! is byte for byte the unsplit one. With the real pip nvcc and cuobjdump.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use object::{Object, ObjectSection};

use crate::common::fake_cc::{gencode, job, write};
use crate::nvcc_steps::{cuobjdump, nvcc};
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::jobserver::Jobserver;
use kbuild::plan::{CompileJob, Lang};
use kbuild::report::Recorder;
use kbuild::schedule::{NvccMode, RunChoice, SplitCompile};

/// Several kernels, so that a split front end has modules to split.
fn source() -> String {
    let mut text = String::from(
        "template <int N> __global__ void k(float* o) { float s = o[threadIdx.x];\n\
         #pragma unroll\n for (int i = 0; i < N; i++) s += __sinf(s * i);\n\
         o[threadIdx.x] = s; }\n",
    );
    for n in [16, 32, 64, 96, 128, 160] {
        text.push_str(&format!("template __global__ void k<{n}>(float*);\n"));
    }
    text
}

/// Each cubin of `object` (by the name cuobjdump gives it) → its sections (name → bytes),
/// every section but `.note.nv.tkinfo`, which records the tool's command line.
pub(crate) fn cubins(
    cuobjdump: &Path,
    object: &Path,
) -> (BTreeMap<String, BTreeMap<String, Vec<u8>>>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cuobjdump)
        .args(["-xelf", "all"])
        .arg(object)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut all = BTreeMap::new();
    let mut notes = String::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let mut sections = BTreeMap::new();
        for section in file.sections() {
            let name = section.name().unwrap().to_string();
            let data = section.data().unwrap().to_vec();
            if name == ".note.nv.tkinfo" {
                notes.push_str(&String::from_utf8_lossy(&data));
            } else {
                sections.insert(name, data);
            }
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        all.insert(name, sections);
    }
    (all, notes)
}

#[test]
fn a_split_unit_compiles_as_steps_to_the_same_cubin_sections_as_unsplit() {
    let nvcc = nvcc();
    let cuobjdump = cuobjdump(&nvcc);
    let mut built = Vec::new();
    for split in [None, Some(4)] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "k.cu", &source());
        let jobs = [CompileJob {
            lang: Lang::Cuda,
            gencodes: vec![gencode(8, 0, false), gencode(9, 0, true)],
            compiler_id: "nvcc".to_string(),
            ..job(root, &nvcc, "k.cu")
        }];
        let run = RunChoice {
            split: split.map(|threads| SplitCompile {
                threads,
                why: "test".into(),
            }),
            ..RunChoice::of(&jobs[0], NvccMode::Steps, 1)
        };
        let shown = kbuild::compile::command_for(&jobs[0], &run).to_string();
        assert_eq!(
            shown.contains("-Xcicc=-split-compile=4"),
            split.is_some(),
            "{shown}"
        );
        // The unsplit one without a jobserver: with free slots a unit splits late (below).
        let settings = CompileSettings {
            jobserver: split.map(|_| Arc::new(Jobserver::new(4).unwrap())),
            runs: vec![run],
            ..CompileSettings::local(root.join("cache"), 4, NvccMode::Steps)
        };
        let recorder = Recorder::default();
        let result = compile_all(&jobs, &settings, &recorder);
        let said = recorder.take();
        assert_eq!(result.unwrap().compiled, ["k.cu"], "{said:?}");
        assert!(
            !said.iter().any(|l| l.contains("compiles with one nvcc")),
            "kbuild knows the split plan's steps: {said:?}"
        );
        built.push(cubins(&cuobjdump, &jobs[0].object));
    }
    let ((plain, plain_notes), (split, split_notes)) = (&built[0], &built[1]);
    assert_eq!(
        plain.len(),
        2,
        "one cubin per capability: {:?}",
        plain.keys()
    );
    // Split or not, every ptxas records one thread (`compile/nvcc/cubin.rs`).
    assert!(plain_notes.contains("-split-compile 1 "), "{plain_notes}");
    assert_eq!(plain_notes, split_notes, "ptxas's options differ");
    assert!(plain == split, "the split unit's cubin sections differ");
}

/// `k.cu` under `root`, for capability 9.0, with no `--split-compile` from the schedule.
fn unsplit_job(root: &Path, nvcc: &Path) -> CompileJob {
    cuda_unit(root, nvcc, "k.cu", &source())
}

/// `name` (holding `text`) under `root`, for capability 9.0.
fn cuda_unit(root: &Path, nvcc: &Path, name: &str, text: &str) -> CompileJob {
    write(root, name, text);
    CompileJob {
        lang: Lang::Cuda,
        gencodes: vec![gencode(9, 0, false)],
        compiler_id: "nvcc".to_string(),
        ..job(root, nvcc, name)
    }
}

/// Compile `job` as nvcc's steps with 4 job slots, through a jobserver or not; what -v said.
fn compile_steps(job: &CompileJob, root: &Path, jobserver: bool) -> Vec<String> {
    let settings = CompileSettings {
        jobserver: jobserver.then(|| Arc::new(Jobserver::new(4).unwrap())),
        ..CompileSettings::local(root.join("cache"), 4, NvccMode::Steps)
    };
    let recorder = Recorder::default();
    let result = compile_all(std::slice::from_ref(job), &settings, &recorder);
    let said = recorder.take();
    assert_eq!(result.unwrap().compiled, ["k.cu"], "{said:?}");
    said
}

#[test]
fn a_unit_the_schedule_left_unsplit_splits_cicc_and_ptxas_over_slots_no_unit_waits_for() {
    // As when one edited `.cu` recompiles and the units the schedule planned beside it turn out
    // fresh: the schedule gave it no `--split-compile`, and the slots would idle.
    let nvcc = nvcc();
    let cuobjdump = cuobjdump(&nvcc);
    let dir = tempfile::tempdir().unwrap();
    let job = unsplit_job(dir.path(), &nvcc);
    let shown =
        kbuild::compile::command_for(&job, &RunChoice::of(&job, NvccMode::Steps, 1)).to_string();
    assert!(!shown.contains("--split-compile"), "{shown}");
    let said = compile_steps(&job, dir.path(), true);
    for pass in ["cicc compute_90", "ptxas sm_90"] {
        assert!(
            said.iter()
                .any(|l| l.contains(&format!("`{pass}` split over 4 threads"))
                    && l.contains("no unit waits to start, 1 running on 4 slots")
                    && l.contains("its share")),
            "{said:?}"
        );
    }
    let (elves, notes) = cubins(&cuobjdump, &job.object);
    assert_eq!(elves.len(), 1, "{:?}", elves.keys());
    // ptxas ran on 4 threads; the cubin records 1, as unsplit (below).
    assert!(notes.contains("-split-compile 1 "), "{notes}");
    let split_elves = elves;

    // Without a jobserver nothing counts the slots: the passes run one thread each.
    let dir = tempfile::tempdir().unwrap();
    let job = unsplit_job(dir.path(), &nvcc);
    let said = compile_steps(&job, dir.path(), false);
    assert!(!said.iter().any(|l| l.contains("split over")), "{said:?}");
    let (elves, unsplit_notes) = cubins(&cuobjdump, &job.object);
    assert_eq!(unsplit_notes, notes);
    assert!(elves == split_elves, "the split cubin's sections differ");
}

#[test]
fn units_other_than_the_longest_start_cicc_after_cudafe_and_v_says_so() {
    // A first build of three units: the schedule marks the one predicted longest critical. The
    // other two are compiling beside each other (neither is the last unit), so each keeps its
    // front ends apart; the critical one runs them side by side.
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let unit = |name: &str, text: &str| cuda_unit(root, &nvcc, name, text);
    let light = "__global__ void k(float* o) { o[threadIdx.x] *= 2.0f; }\n";
    let jobs = [
        unit("heavy.cu", &source()),
        unit("light_a.cu", light),
        unit("light_b.cu", light),
    ];
    let runs = (jobs.iter().zip([true, false, false]))
        .map(|(job, critical)| RunChoice {
            critical,
            ..RunChoice::of(job, NvccMode::Steps, 1)
        })
        .collect();
    let settings = CompileSettings {
        jobserver: Some(Arc::new(Jobserver::new(4).unwrap())),
        runs,
        ..CompileSettings::local(root.join("cache"), 4, NvccMode::Steps)
    };
    let recorder = Recorder::default();
    let result = compile_all(&jobs, &settings, &recorder);
    let said = recorder.take();
    let mut compiled = result.unwrap().compiled;
    compiled.sort();
    assert_eq!(
        compiled,
        ["heavy.cu", "light_a.cu", "light_b.cu"],
        "{said:?}"
    );
    let apart = |label: &str| {
        said.iter().any(|l| {
            l.contains(&format!(
                "`{label}`: `cicc compute_90` started after `cudafe++`"
            )) && l.contains("not the longest unit")
        })
    };
    assert!(
        !apart("heavy.cu"),
        "the critical unit waits for nothing: {said:?}"
    );
    assert!(
        apart("light_a.cu") || apart("light_b.cu"),
        "a unit compiling beside others keeps its front ends apart: {said:?}"
    );
    for job in &jobs {
        let (elves, _) = cubins(&cuobjdump(&nvcc), &job.object);
        assert_eq!(elves.len(), 1, "{}: {:?}", job.label, elves.keys());
    }
}

/// A unit alike its siblings but for `kSize`, how many kernels it instantiates (each a loop
/// unrolled 512 steps): its cost follows that number, which no source scan prices.
fn sized(size: usize) -> String {
    format!(
        "#include <utility>\nconstexpr int kSize = {size:4};\n\
         template <int I> __global__ void kernel(float* o) {{ float s = o[threadIdx.x];\n\
         #pragma unroll\n for (int i = 0; i < 512; i++) s += __sinf(s * (i + I)) * __cosf(s + i);\n\
         o[threadIdx.x] = s; }}\n\
         template <int... Is> const void* const* table(std::integer_sequence<int, Is...>) {{\n\
         static const void* const kernels[] = {{reinterpret_cast<const void*>(&kernel<Is>)...}};\n\
         return kernels; }}\n\
         const void* const* kernels() {{ return table(std::make_integer_sequence<int, kSize>{{}}); }}\n"
    )
}

/// Compile every one of `jobs` as nvcc's steps, sharing a jobserver of `slots`; what -v said.
fn compile_all_steps(jobs: &[CompileJob], root: &Path, slots: usize) -> Vec<String> {
    let settings = CompileSettings {
        jobserver: Some(Arc::new(Jobserver::new(slots).unwrap())),
        ..CompileSettings::local(root.join("cache"), slots, NvccMode::Steps)
    };
    let recorder = Recorder::default();
    let result = compile_all(jobs, &settings, &recorder);
    let said = recorder.take();
    assert_eq!(result.unwrap().compiled.len(), jobs.len(), "{said:?}");
    said
}

#[test]
fn the_unit_its_measured_siblings_say_the_build_waits_for_splits_its_ptxas_over_every_slot() {
    // Four slots, nothing waiting: three siblings of 2, 12 and 192 kernels and a slow C++ unit
    // start at once. Once the two small ones have compiled, their times against kSize predict
    // the large one far longer than anything else: its ptxas, starting after its long cicc
    // while the C++ unit still runs (a share of 2 slots), takes all 4.
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fake = crate::common::fake_cc::FakeCompiler::new(root);
    let mut jobs: Vec<CompileJob> = [2, 12, 192]
        .iter()
        .enumerate()
        .map(|(i, &size)| cuda_unit(root, &nvcc, &format!("unit_{i}.cu"), &sized(size)))
        .collect();
    write(root, "slow.cpp", "// SLEEP 25\n");
    jobs.push(job(root, &fake.path, "slow.cpp"));
    let said = compile_all_steps(&jobs, root, 4);
    let waited: Vec<&String> = (said.iter())
        .filter(|l| l.contains("the build waits for this unit"))
        .collect();
    assert!(
        waited.iter().any(
            |l| l.contains("`unit_2.cu`: `ptxas sm_90` split over 4 threads")
                && l.contains("measured, `constexpr int kSize =  192;`")
        ),
        "{said:?}"
    );
    assert!(
        waited.iter().all(|l| l.contains("`unit_2.cu`")),
        "only the large unit: {waited:?}"
    );
    let (elves, notes) = cubins(&cuobjdump(&nvcc), &jobs[2].object);
    assert_eq!(elves.len(), 1, "{:?}", elves.keys());
    assert!(notes.contains("-split-compile 1 "), "{notes}");
}

#[test]
fn a_ptxas_whose_ptx_predicts_several_typical_ones_splits_as_it_starts() {
    // Two slots, eleven units that are no siblings (each its own kernel name) and that a
    // source scan prices alike: two small ones start first; the third instantiates 96
    // kernels, and eight small ones still wait while it compiles. When its ptxas starts, the
    // small ones' ptxas have measured the build's CPU per byte of PTX, and its PTX predicts
    // far more than theirs: it splits over both slots at once, though units wait.
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut sizes = vec![(2, "a"), (4, "b"), (96, "c")];
    sizes.extend(["d", "e", "f", "g", "h", "i", "j", "k"].map(|name| (2, name)));
    let jobs: Vec<CompileJob> = (sizes.iter())
        .map(|&(size, name)| {
            let text = sized(size).replace("kernel", &format!("kernel_{name}"));
            cuda_unit(root, &nvcc, &format!("unit_{name}.cu"), &text)
        })
        .collect();
    let said = compile_all_steps(&jobs, root, 2);
    let sized_by_ptx: Vec<&String> = (said.iter())
        .filter(|l| l.contains("split over") && l.contains("its PTX"))
        .collect();
    assert!(
        sized_by_ptx.iter().any(|l| l.contains(
            "`unit_c.cu`: `ptxas sm_90` split over 2 threads (--split-compile): its PTX ("
        ) && l.contains("x the typical input of the")),
        "{said:?}"
    );
    assert!(
        sized_by_ptx.iter().all(|l| l.contains("`unit_c.cu`")),
        "only the large unit: {sized_by_ptx:?}"
    );
    assert!(
        !said
            .iter()
            .any(|l| l.contains("the build waits for this unit")),
        "no siblings here: {said:?}"
    );
    let (elves, notes) = cubins(&cuobjdump(&nvcc), &jobs[2].object);
    assert_eq!(elves.len(), 1, "{:?}", elves.keys());
    assert!(notes.contains("-split-compile 1 "), "{notes}");
}
