//! Command-line interface: clap derive structs only. Resolution into settings lives in `commands`.

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::{Arg, Args, Parser, Subcommand, ValueEnum, ValueHint};

use crate::config::Backend;

/// Build GPU kernels for the Hugging Face Kernel Hub, and publish them.
///
/// kbuild reads a kernel project's `build.toml` (the format of HF kernel-builder, edition 5 or the
/// edition-less v4), compiles its CUDA and C++ sources with nvcc and the host compiler for every
/// CUDA capability in the matrix, links a PyTorch extension per backend, and lays the result out
/// as Hub build variants under `build/` that Python's `kernels` library loads.
#[derive(Debug, Parser)]
#[command(
    name = "kbuild",
    version = version(),
    propagate_version = true,
    max_term_width = 100,
    after_help = "Typical use:\n  \
        kbuild check-config              validate build.toml without building\n  \
        kbuild list-variants             what this toolchain would produce\n  \
        kbuild build                     compile and write build/<variant>/\n  \
        kbuild publish --repo org/name   upload build/ to the Hub"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Kernel project directory (the one holding build.toml) [default: the nearest directory
    /// holding build.toml, from the current one up, as cargo finds Cargo.toml].
    // Empty stands for "not given": `commands::run` then walks up from the working directory.
    #[arg(
        short = 'C',
        long = "project",
        global = true,
        value_name = "DIR",
        default_value = "",
        hide_default_value = true,
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub project: PathBuf,
    /// Show the commands run and the cache's decisions.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Print only warnings and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile the project and write build/<variant>/ for each backend.
    ///
    /// Sources compile in parallel; objects are cached under build/.kbuild, keyed on the source,
    /// every header it includes, the flags and the compiler version, so a rebuild without changes
    /// runs no compiler. Each variant is staged and renamed into place: a failed build never
    /// leaves a half-written variant and never removes the previous one.
    /// (`build-and-copy`, HF's name, is the same: the variants are written into build/.)
    #[command(visible_alias = "build-and-copy")]
    Build(BuildArgs),
    /// Build, then write one wheel per variant into dist/.
    ///
    /// `pip install dist/<name>-<version>+<variant>-cp39-abi3-manylinux_2_28_x86_64.whl` makes
    /// the kernel importable under its package name (the tag is `linux_<arch>` when an extension
    /// does not meet manylinux_2_28, e.g. built with `--manylinux none`). The local version
    /// (`1+torch215.cxx11.cu132`) keeps variants apart; METADATA pins torch to the major.minor
    /// the variant was built for. Without `--backend`, `--variant` or `--cuda-capabilities` it
    /// builds what can run here, as `develop` does (cpu without a GPU; CUDA for this machine's
    /// GPUs with one). Wheels are byte-for-byte reproducible from the same build.
    Wheel(BuildOptions),
    /// Build, then make the variant importable in a virtual environment under its package name.
    ///
    /// Like `maturin develop`: afterwards `import <package>` (a kernel's own `pytest tests/`)
    /// runs the fresh build. A `.pth` in the environment points at a directory of that
    /// environment's own under build/.kbuild/develop, which links to build/<variant>: later
    /// `kbuild build`s are picked up without running develop again, and a develop into another
    /// environment never changes what this one imports. The environment is `--python`'s, else
    /// the active one (`VIRTUAL_ENV`), else ./.venv. The variant is selected as `build` selects
    /// (`--backend`, `--torch`, `--variant`, kbuild.lock); when several remain, the one built
    /// with that environment's Python, then the backend `kernels` loads with its torch (cuda
    /// for a CUDA torch, else cpu). It is chosen and printed before anything is built. Without
    /// `--backend`, `--variant` or `--cuda-capabilities` only what can run here is built: cpu
    /// on a machine without a GPU, CUDA for this machine's GPUs (`native`) on one with.
    Develop(DevelopArgs),
    /// Build what can run here, make it importable, and run the project's own tests (pytest).
    ///
    /// `kbuild develop` (on a machine without a GPU, the cpu variant), then `python -m pytest`
    /// in that environment, in the project, with `tests` unless pytest arguments follow `--`
    /// (`kbuild test -- -x -k relu`). The tests run unchanged: a pytest plugin kbuild writes
    /// at run time makes `kernels.get_kernel`/`get_local_kernel` load the backend that was
    /// built unless a test names one (PyPI's Linux torch would otherwise ask for cuda). Exits
    /// as pytest exits.
    Test(TestArgs),
    /// Write each built variant as `<name>-<variant>.tar.gz` into dist/.
    ///
    /// An artifact holds `<variant>/…` with its metadata.json (and so its digest), for CI jobs
    /// that each build one variant and hand them to one publish job: `kbuild publish
    /// --build-dir` takes an artifact, or a directory of artifacts and variant directories.
    /// Artifacts are byte-for-byte reproducible from the same variant.
    Pack(PackArgs),
    /// Check built variants against the Hub's rules; exits non-zero on any violation.
    ///
    /// PATH is a build directory (default <project>/build), a variant directory, an artifact
    /// or a wheel. Rules: metadata parses, digest matches, `id` is the op namespace, the files
    /// kernels needs, a valid variant name; for each extension the manylinux symbol versions and
    /// Python abi3 (3.9) of HF's kernel-abi-check, DT_NEEDED (libc, libstdc++, torch's and
    /// torch's CUDA libraries only), no RPATH/RUNPATH into the build machine, and
    /// `backend.archs` equal to the cubins (when cuobjdump is found). HF's `check-abi` and
    /// `check-builds` run these rules too.
    #[command(visible_aliases = ["check-abi", "check-builds"])]
    Check(CheckArgs),
    /// Validate build.toml (keys, types, paths, capabilities) without building.
    CheckConfig(CheckConfigArgs),
    /// Rewrite an edition-less (v4) build.toml as edition 5, keeping its comments and order.
    ///
    /// Adds `edition = 5` to `[general]`, after `version`, as HF's `kernel-builder update-build`
    /// does; every other line stays as written (kernel-builder re-prints the whole file). The
    /// new file is read back and written only if it is the same project. Prints the changed
    /// lines. An edition-5 file is refused, except by `--check`.
    ///
    /// Example: `kbuild update-config --dry-run` shows the change, `kbuild update-config` writes
    /// it, `kbuild check-config` confirms. In CI, `kbuild update-config --check` exits 1 while
    /// build.toml still needs updating.
    #[command(visible_alias = "update-build")]
    UpdateConfig(UpdateConfigArgs),
    /// Print the build variants `kbuild build` would produce, selected as it selects them.
    ListVariants(ListVariantsArgs),
    /// Upload build/ to a Hub kernel repository.
    ///
    /// Files go to the branch `v<version>`; the kernel card goes to `README.md` on `main`.
    /// Unchanged files are not uploaded; an unchanged build makes no commit.
    /// Auth: `HF_TOKEN`, else the token file under `HF_HOME`. `HF_ENDPOINT` selects the server.
    /// Ends with the repository's URL and the Python line that loads the build.
    #[command(visible_alias = "upload")]
    Publish(PublishArgs),
    /// Build, then publish (HF's `build-and-upload`): `kbuild build` then `kbuild publish`.
    BuildAndUpload(BuildAndUploadArgs),
    /// Check that variants are what they claim: digest, signature, and a rebuild from source.
    ///
    /// PATH is a variant directory, a build directory (default <project>/build), an artifact or
    /// a wheel; `--repo ORG/NAME --version N` downloads what is published instead. Each
    /// variant's files are hashed as `kernels` hashes them on load and compared with the digest
    /// in its metadata.json. `--rebuild` builds the variants again from the sources here (under
    /// the op namespace they carry, into a temporary directory) and compares every file byte for
    /// byte, naming each that differs: "identical" when none does (docs/reproducible.md).
    /// Exits 1 when a check fails.
    #[command(disable_version_flag = true)]
    Verify(VerifyArgs),
    /// Sign each variant's metadata.json with Sigstore (keyless), as `metadata.json.sigstore`.
    ///
    /// PATH is a variant directory or a build directory (default <project>/build). The bundle
    /// is what `cosign sign-blob --bundle` writes, and what `kernels` verifies
    /// (docs/signing.md). The identity is GitHub Actions' OIDC token (the job needs
    /// `permissions: id-token: write`), or `--identity-token`; without one kbuild fails, it
    /// never skips signing. Public-good Sigstore, or the instance `--trust-config` names.
    Sign(SignArgs),
    /// Install, list or remove managed toolchains (torch and its CUDA toolkit from PyPI).
    ///
    /// Each toolchain is a virtual environment under `$KBUILD_CACHE_DIR/toolchains` (default
    /// `~/.cache/kbuild/toolchains`), made with uv when it is on PATH, else with pip. `install`
    /// records the exact versions in the project's kbuild.lock; `kbuild build --torch 2.14,2.15`
    /// builds one variant per toolchain.
    Toolchain(ToolchainCommandArgs),
    /// Start a kernel project: build.toml, one op for CUDA and CPU, its package, tests, CI.
    ///
    /// Writes an edition-5 build.toml, `torch-ext/torch_binding.{cpp,h}` (op schema and the
    /// registration boilerplate), `csrc/` with the op's CUDA and CPU implementation,
    /// `torch-ext/<package>/__init__.py`, a pytest suite, README.md, .gitignore and a GitHub
    /// workflow. It builds as generated:
    /// `kbuild init my-kernel && cd my-kernel && kbuild develop --backend cpu && pytest tests`.
    /// Existing files are never replaced without `--overwrite`.
    Init(InitArgs),
    /// Remove what kbuild wrote into build/ (variants, build/.kbuild), and dist/ with `--dist`.
    ///
    /// Runs under the build's lock, so it never pulls files from under a running build. Files
    /// in build/ that kbuild did not write are kept and named. The next build compiles
    /// everything again; a `kbuild develop` link works again after the next build.
    Clean(CleanArgs),
    /// Write pyproject.toml so that `pip install .` builds the kernel with `kbuild wheel`.
    ///
    /// The `[build-system]` names a PEP 517 backend kept in the project (`kbuild_backend.py`,
    /// through `backend-path`, `requires = []`): pip needs nothing from an index, finds kbuild
    /// on PATH (or `$KBUILD`) and builds against the torch of the environment it installs into.
    /// `pip install . -C backend=cpu` chooses the backend [default: the one `kernels` loads].
    CreatePyproject(CreatePyprojectArgs),
    /// Print the kernel card `kbuild publish` puts on the Hub as `README.md`.
    ///
    /// The project's `CARD.md` is rendered as HF's kernel-builder renders it (Jinja, with
    /// `repo_id`, `functions`, `layers`, `has_benchmark`, `upstream` and `license`); without
    /// one, kbuild's card describes the build (variants, capabilities and dtypes, how to load).
    /// Reads the built variants: build first.
    FillCard(FillCardArgs),
    /// Recompute the digest of built variants as `kernels` verifies it, and compare.
    ///
    /// The digest in metadata.json lists every file of the variant with its hash; `kernels`
    /// refuses a variant whose files differ. Exits non-zero on a mismatch; `--write` puts the
    /// recomputed digest into metadata.json instead (after editing a variant's Python by hand).
    Hash(HashArgs),
    /// Print a shell completion script.
    ///
    /// Example: kbuild completions bash > ~/.local/share/bash-completion/completions/kbuild
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory of the new project, created when missing.
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Kernel name: lowercase letters, digits and `-`; the Python package replaces `-` with `_`
    /// [default: the name of `--repo`, else the directory's]. `owner/name` (HF's form) also
    /// sets `--repo`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Hub repository `owner/name` that `kbuild publish` and the generated CI upload to
    /// (`[general.hub] repo-id`).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Backends to scaffold, comma-separated: `cuda`, `cpu`.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "cuda,cpu"
    )]
    pub backends: Vec<String>,
    /// Hub license identifier for build.toml (`[general] license`).
    #[arg(long, value_name = "ID", default_value = "apache-2.0")]
    pub license: String,
    /// Replace files of the skeleton that exist (others in the directory are left alone).
    #[arg(long)]
    pub overwrite: bool,
    /// Print the written files as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Output directory to clean [default: <project>/build].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Also remove kbuild's wheels and artifacts from the dist directory.
    #[arg(long)]
    pub dist: bool,
    /// The dist directory for `--dist` [default: <project>/dist].
    #[arg(long, value_name = "DIR", requires = "dist")]
    pub dist_dir: Option<PathBuf>,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print what was removed and kept as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BuildAndUploadArgs {
    #[command(flatten)]
    pub options: BuildOptions,
    /// Target repository `org/name` [default: `[general.hub] repo-id` in build.toml].
    #[arg(long, value_name = "ORG/NAME", alias = "repo-id")]
    pub repo: Option<String>,
    /// Branch to publish to [default: v<version>].
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Create the repository as private if it does not exist.
    #[arg(long)]
    pub private: bool,
    /// Repository type (`model` for legacy kernel repos).
    #[arg(long, value_enum, default_value_t = RepoTypeArg::Kernel)]
    pub repo_type: RepoTypeArg,
    /// Open pull requests instead of committing.
    #[arg(long)]
    pub create_pr: bool,
}

#[derive(Debug, Args)]
pub struct FillCardArgs {
    /// Repository the card names `org/name` [default: `[general.hub] repo-id` in build.toml].
    #[arg(long, value_name = "ORG/NAME")]
    pub repo: Option<String>,
    /// Directory holding the variants [default: <project>/build].
    #[arg(long, value_name = "DIR")]
    pub build_dir: Option<PathBuf>,
    /// Write the card to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HashArgs {
    /// A variant directory, or a build directory whose variants are all hashed
    /// [default: <project>/build].
    pub path: Option<PathBuf>,
    /// Write the recomputed digest into metadata.json where it differs or is missing (a
    /// `metadata.json.sigstore` signature then no longer matches: sign again).
    #[arg(long)]
    pub write: bool,
    /// Print each variant's status and digest as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How to find the toolchain.
#[derive(Debug, Args, Clone, Default)]
pub struct ToolchainArgs {
    /// Python interpreter with torch installed [default: $KBUILD_PYTHON, the active venv,
    /// ./.venv, python3].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// nvcc to use [default: $CUDA_HOME/bin/nvcc, PATH, then the pip CUDA next to torch].
    #[arg(long, value_name = "PATH")]
    pub nvcc: Option<PathBuf>,
}

/// Which variants: `build`, `develop` and `list-variants` select the same way.
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Only these backends (repeatable) [default: every backend in build.toml that this
    /// machine can build].
    #[arg(
        long = "backend",
        value_name = "NAME",
        value_parser = BackendName,
        hide_possible_values = true
    )]
    pub backends: Vec<String>,
    /// For these torch versions (comma-separated), one variant set per toolchain
    /// [default: the toolchains in kbuild.lock, else the Python found as for `--python`].
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',', value_hint = ValueHint::Other)]
    pub torch: Vec<String>,
    /// Only these variants (repeatable), e.g. one per CI job; `kbuild list-variants` names them.
    #[arg(long = "variant", value_name = "NAME", value_hint = ValueHint::Other)]
    pub variants: Vec<String>,
    /// Build only these CUDA capabilities (comma-separated, e.g. `9.0`), or `native` for the
    /// GPUs of this machine; kernels that none of them runs are skipped [default: the project's
    /// whole matrix].
    #[arg(long, value_name = "LIST|native", env = "KBUILD_CUDA_CAPABILITIES")]
    pub cuda_capabilities: Option<crate::plan::CudaCapabilities>,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub options: BuildOptions,
    /// Print the plan (variants, compile commands) without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write one wheel per variant (see `kbuild wheel`).
    #[arg(long)]
    pub wheel: bool,
    /// Also write one `<name>-<variant>.tar.gz` per variant (see `kbuild pack`).
    #[arg(long)]
    pub artifact: bool,
}

/// The flags of every verb that builds (`build`, `wheel`, `develop`, `test`), declared once:
/// the toolchain, the selection, `-j`, `--memory` and `--out-dir`.
#[derive(Debug, Clone, Args)]
pub struct BuildFlags {
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Parallel compile jobs [default: one per core].
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Memory the compilers may use at once, e.g. `8G`: each starts once the peak it reached
    /// last build fits (never measured: guessed from what nvcc's steps read and from a C++
    /// unit's preprocessed size, else 3 GiB)
    /// [env: KBUILD_MEMORY] [default: the cgroup's
    /// limit or MemAvailable].
    #[arg(long, value_name = "SIZE", env = "KBUILD_MEMORY", hide_env = true, value_parser = crate::schedule::memory::parse_size)]
    pub memory: Option<u64>,
    /// Output directory [default: <project>/build].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// What `build` and `wheel` take alike.
#[derive(Debug, Args)]
pub struct BuildOptions {
    #[command(flatten)]
    pub flags: BuildFlags,
    /// Run every compiler under this program, e.g. `sccache` [env: KBUILD_COMPILER_LAUNCHER].
    #[arg(long, value_name = "PROGRAM", env = "KBUILD_COMPILER_LAUNCHER")]
    pub compiler_launcher: Option<PathBuf>,
    /// Op namespace suffix instead of the hash of the sources: ASCII letters, digits and `_`,
    /// at most 64.
    #[arg(long, value_name = "ID", value_parser = crate::plan::parse_unique_id)]
    pub unique_id: Option<String>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where wheels and artifacts go [default: <project>/dist].
    #[arg(long, value_name = "DIR")]
    pub dist_dir: Option<PathBuf>,
    /// Make each extension meet this manylinux policy after linking, whatever glibc and
    /// libstdc++ this machine has (README: "Portable builds"); `none` keeps it as linked.
    #[arg(long, value_name = "POLICY", default_value = "manylinux_2_28")]
    pub manylinux: String,
}

#[derive(Debug, Args)]
pub struct DevelopArgs {
    #[command(flatten)]
    pub flags: BuildFlags,
    /// Print the selected variant's plan without building or linking anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Undo `kbuild develop` in the environment: remove its `.pth` and link (nothing is built).
    #[arg(long, conflicts_with = "dry_run")]
    pub uninstall: bool,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub flags: BuildFlags,
    /// Arguments for pytest, after `--` [default: `tests`].
    #[arg(last = true, value_name = "PYTEST_ARGS")]
    pub pytest_args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct ToolchainCommandArgs {
    #[command(subcommand)]
    pub command: ToolchainCommand,
}

#[derive(Debug, Subcommand)]
pub enum ToolchainCommand {
    /// Install a toolchain (or, without `--torch`, every toolchain in kbuild.lock).
    ///
    /// Example: kbuild toolchain install --torch 2.14 --with kernels==0.17.2
    Install(ToolchainInstallArgs),
    /// Make an environment you already have (the active venv) a toolchain, without a download.
    ///
    /// Its torch, CUDA and nvidia packages are pinned in kbuild.lock as `install` pins them
    /// (another machine's `kbuild toolchain install` installs the same versions); here builds
    /// use the environment itself. Example: kbuild toolchain add --python .venv/bin/python
    Add(ToolchainAddArgs),
    /// List the installed toolchains.
    List(ToolchainListArgs),
    /// Delete an installed toolchain (its kbuild.lock entry stays).
    Remove(ToolchainRemoveArgs),
}

#[derive(Debug, Args)]
pub struct ToolchainInstallArgs {
    /// torch version(s), `MAJOR.MINOR` (newest patch) or `MAJOR.MINOR.PATCH`, comma-separated.
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',')]
    pub torch: Vec<String>,
    /// CUDA version [default: the one torch's PyPI wheels need]. CUDA 12 needs `--index-url`
    /// (PyPI has no CUDA 12 nvcc: build with `--nvcc` or `CUDA_HOME`).
    #[arg(long, value_name = "MAJOR.MINOR", conflicts_with = "cpu")]
    pub cuda: Option<String>,
    /// No CUDA toolkit: for cpu variants only.
    #[arg(long)]
    pub cpu: bool,
    /// Package index instead of PyPI (e.g. https://download.pytorch.org/whl/cu126).
    #[arg(long, value_name = "URL")]
    pub index_url: Option<String>,
    /// Another requirement to install in the toolchain (repeatable), e.g. `kernels==0.17.2`.
    #[arg(long = "with", value_name = "REQUIREMENT")]
    pub with: Vec<String>,
    /// Interpreter to make the environment from [default: python3].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Do not write kbuild.lock.
    #[arg(long)]
    pub no_lock: bool,
}

#[derive(Debug, Args)]
pub struct ToolchainListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Build directory, variant directory, artifact (.tar.gz) or wheel [default: <project>/build].
    pub path: Option<std::path::PathBuf>,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// manylinux policy for symbol versions; `none` skips that rule (e.g. for a build on a
    /// distribution newer than the policy, used only locally).
    #[arg(long, value_name = "POLICY", default_value = "manylinux_2_28")]
    pub manylinux: String,
    /// cuobjdump for the `archs` rule [default: PATH, then $CUDA_HOME/bin; without one the
    /// rule is skipped].
    #[arg(long, value_name = "PATH")]
    pub cuobjdump: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PackArgs {
    /// Directory holding the variants [default: <project>/build].
    #[arg(long, value_name = "DIR")]
    pub build_dir: Option<PathBuf>,
    /// Pack only these variants (repeatable) [default: all in the build directory].
    #[arg(long = "variant", value_name = "NAME", value_hint = ValueHint::Other)]
    pub variants: Vec<String>,
    /// Where the artifacts go [default: <project>/dist].
    #[arg(long, value_name = "DIR")]
    pub dist_dir: Option<PathBuf>,
    /// Print the written artifacts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CreatePyprojectArgs {
    /// Replace an existing pyproject.toml and kbuild_backend.py.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct ToolchainAddArgs {
    /// The environment's interpreter [default: $KBUILD_PYTHON, the active venv, ./.venv,
    /// python3].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Do not write kbuild.lock.
    #[arg(long)]
    pub no_lock: bool,
}

#[derive(Debug, Args)]
pub struct ToolchainRemoveArgs {
    /// Toolchain name, e.g. `torch2.14-cu130` (see `kbuild toolchain list`).
    pub name: String,
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// Print the parsed configuration as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UpdateConfigArgs {
    /// Print what would change; write nothing.
    #[arg(long, conflicts_with = "check")]
    pub dry_run: bool,
    /// Write nothing; exit 1 if build.toml needs updating, 0 if it is already edition 5.
    #[arg(long)]
    pub check: bool,
    /// Print the manifest, its status and the changed lines as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListVariantsArgs {
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Hub repository type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum RepoTypeArg {
    #[default]
    Kernel,
    Model,
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Target repository `org/name` [default: `[general.hub] repo-id` in build.toml].
    #[arg(long, value_name = "ORG/NAME", alias = "repo-id")]
    pub repo: Option<String>,
    /// Repository type (`model` for legacy kernel repos).
    #[arg(long, value_enum, default_value_t = RepoTypeArg::Kernel)]
    pub repo_type: RepoTypeArg,
    /// Create the repository as private if it does not exist.
    #[arg(long)]
    pub private: bool,
    /// Branch to publish to [default: v<version> from build.toml / metadata.json].
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Publish only these variants (repeatable) [default: all in the build directory].
    #[arg(long = "variant", value_name = "NAME", value_hint = ValueHint::Other)]
    pub variants: Vec<String>,
    /// Directory holding the variants [default: <project>/build].
    #[arg(long, value_name = "DIR")]
    pub build_dir: Option<PathBuf>,
    /// Open pull requests instead of committing.
    #[arg(long)]
    pub create_pr: bool,
    /// Print the plan (adds, deletes, unchanged, bytes) without writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Publish a build made from a dirty git tree.
    #[arg(long)]
    pub allow_dirty: bool,
    /// Publish variants built for part of the CUDA matrix (`--cuda-capabilities`).
    #[arg(long)]
    pub allow_partial: bool,
    /// Publish variants built from different commits together.
    #[arg(long)]
    pub allow_mixed: bool,
    /// Publish variants that kbuild did not build (their metadata names another builder).
    #[arg(long)]
    pub allow_foreign: bool,
    /// Publish without running `kbuild check`'s rules first.
    #[arg(long)]
    pub skip_check: bool,
    /// manylinux policy for `kbuild check`'s symbol-version rule; `none` skips that rule.
    #[arg(long, value_name = "POLICY", default_value = "manylinux_2_28")]
    pub manylinux: String,
    /// Sign each variant's metadata.json with Sigstore before uploading (`kbuild sign`).
    #[arg(long)]
    pub sign: bool,
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// Shell to generate for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `--backend`: shell completions offer build.toml's backend names; any name is passed on, so
/// a wrong one gets kbuild's own error (unknown backend, did you mean, the valid names).
#[derive(Debug, Clone, Copy)]
struct BackendName;

impl TypedValueParser for BackendName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            Backend::ALL.iter().map(|b| PossibleValue::new(b.as_str())),
        ))
    }
}

/// `0.1.0 (1a1fc12 2026-11-27)`: the crate's version and the commit build.rs found, as
/// `cargo --version` prints its own; the bare version where the build knew no commit.
fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| match option_env!("KBUILD_COMMIT_INFO") {
            Some(commit) => format!("{} ({commit})", env!("CARGO_PKG_VERSION")),
            None => env!("CARGO_PKG_VERSION").to_string(),
        });
    &VERSION
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A variant directory, a build directory, an artifact or a wheel
    /// [default: <project>/build].
    #[arg(conflicts_with = "repo")]
    pub path: Option<PathBuf>,
    /// Verify what is published in this Hub repository (`HF_ENDPOINT` selects the server).
    #[arg(long, value_name = "ORG/NAME")]
    pub repo: Option<String>,
    /// The published kernel version (branch `v<N>`).
    #[arg(long, value_name = "N", requires = "repo", conflicts_with = "revision")]
    pub version: Option<u32>,
    /// A branch or commit of `--repo` instead of `--version`.
    #[arg(long, value_name = "REV", requires = "repo")]
    pub revision: Option<String>,
    /// Repository type of `--repo` (`model` for legacy kernel repos).
    #[arg(long, value_enum, default_value_t = RepoTypeArg::Kernel)]
    pub repo_type: RepoTypeArg,
    /// Only this variant (repeatable).
    #[arg(long = "variant", value_name = "NAME")]
    pub variants: Vec<String>,
    /// Rebuild from the sources here and compare every file (kbuild's caches as they are:
    /// `KBUILD_CACHE_DIR=$(mktemp -d)` compiles every unit anew).
    #[arg(long)]
    pub rebuild: bool,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
    /// Parallel compile jobs for `--rebuild` [default: one per core].
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Require a signature by this GitHub workflow
    /// (`org/repo/.github/workflows/build.yaml@refs/heads/main`; without `@ref`, any ref).
    /// Without a signer option, the signer the published branch records (`signing.json`,
    /// written by a signed publish) is required; without a record, none.
    #[arg(long, value_name = "WORKFLOW")]
    pub signer_workflow: Option<String>,
    /// Require a signature whose certificate names exactly this identity.
    #[arg(long, value_name = "IDENTITY")]
    pub identity: Option<String>,
    /// Require this OIDC issuer [default with --signer-workflow: GitHub Actions'].
    #[arg(long, value_name = "URL")]
    pub issuer: Option<String>,
    /// A Sigstore ClientTrustConfig (trusted root and services) instead of public-good Sigstore.
    #[arg(long, value_name = "FILE")]
    pub trust_config: Option<PathBuf>,
    /// Print each variant's findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How to sign with Sigstore.
#[derive(Debug, Args, Clone, Default)]
pub struct SigningArgs {
    /// An OIDC identity token to sign with [default: GitHub Actions' ambient token].
    #[arg(
        long,
        value_name = "JWT",
        env = "SIGSTORE_ID_TOKEN",
        hide_env_values = true
    )]
    pub identity_token: Option<String>,
    /// A Sigstore ClientTrustConfig (trusted root and services) instead of public-good Sigstore.
    #[arg(long, value_name = "FILE")]
    pub trust_config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// A variant directory, or a build directory whose variants are all signed
    /// [default: <project>/build].
    pub path: Option<PathBuf>,
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Print what was signed as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
