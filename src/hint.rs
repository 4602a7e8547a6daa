//! The `hint:` line every error can offer, and the hints drawn from what a compiler printed. A
//! leaf module: stages import it, it imports nothing.

/// Something every stage error can offer: what the user should do next.
pub trait Hint {
    /// A line for `hint:`, or `None` when there is nothing useful to add.
    fn hint(&self) -> Option<String>;
}

/// A `hint:` for a compiler failure, drawn from what the compiler (gcc, nvcc, ptxas) printed:
/// the common failures whose fix is not in the message itself. `None` when none is known.
pub fn compiler_hint(output: &str) -> Option<String> {
    let has = |needle: &str| output.contains(needle);
    let hint = if has("nsupported gpu architecture") {
        "this nvcc cannot compile that CUDA capability: drop it from the kernel's \
         `cuda-capabilities` (`kbuild list-variants` shows what this nvcc builds), or build with \
         a newer CUDA toolkit"
    } else if has("unsupported GNU version") || has("unsupported clang version") {
        "nvcc does not support this host compiler: point `NVCC_CCBIN` (or `CXX`) at a g++ that \
         this CUDA version supports, or add `-allow-unsupported-compiler` to the kernel's \
         `cuda-flags`"
    } else if has("__nv_bfloat16") && (has("is undefined") || has("no instance")) {
        "`__nv_bfloat16` is declared in `<cuda_bf16.h>`: include it; bf16 code needs CUDA \
         capability 8.0 or newer, so guard it with `#if KBUILD_HAS_BF16` and list the dtypes \
         per capability under `[kbuild.cuda-capabilities]` (docs/authoring.md)"
    } else if has("uses too much shared data") || has("too much shared memory") {
        "the kernel's static shared memory exceeds what the capability allows (48 KiB): use \
         dynamic shared memory with `cudaFuncSetAttribute`, or a smaller tile"
    } else if has("cuda_runtime.h") && (has("No such file") || has("cannot open source file")) {
        "the CUDA headers are missing: install them next to torch \
         (`pip install \"cuda-toolkit[nvcc,cccl]==<torch's CUDA version>\"`), or set `CUDA_HOME`"
    } else if has("torch/extension.h") && has("No such file") {
        "the unit needs torch's headers: torch must be installed in the Python kbuild uses \
         (`--python`, `KBUILD_PYTHON`)"
    } else if has("No such file or directory") && has("fatal error:") {
        "a header is not found: add its directory to the kernel's `include` in build.toml \
         (paths are relative to the project), or list it in `src` if it is the project's own"
    } else {
        return None;
    };
    Some(hint.to_string())
}

#[cfg(test)]
mod tests {
    use super::compiler_hint;

    #[test]
    fn nvcc_and_ptxas_failures_get_a_hint_and_plain_syntax_errors_none() {
        let arch = "nvcc fatal   : Unsupported gpu architecture 'compute_35'";
        assert!(compiler_hint(arch).unwrap().contains("cuda-capabilities"));
        let gcc = "crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc \
                   versions later than 13 are not supported!";
        assert!(compiler_hint(gcc).unwrap().contains("NVCC_CCBIN"));
        let bf16 = "k.cu(12): error: identifier \"__nv_bfloat16\" is undefined";
        assert!(compiler_hint(bf16).unwrap().contains("KBUILD_HAS_BF16"));
        let smem = "ptxas error   : Entry function '_Z1kv' uses too much shared data \
                    (0x10000 bytes, 0xc000 max)";
        assert!(
            compiler_hint(smem)
                .unwrap()
                .contains("dynamic shared memory")
        );
        let header = "k.cpp:1:10: fatal error: mine.h: No such file or directory";
        assert!(compiler_hint(header).unwrap().contains("`include`"));
        assert_eq!(compiler_hint("k.cpp:1:16: error: expected ')'"), None);
    }
}
