//! `cargo xtask package`: every published crate packaged and verified
//! (`cargo package --workspace`), and the crates outside the workspace
//! (`fuzz/`, `bench-compare/`) built.

use crate::{Result, cargo, root, run};

/// `cargo xtask package`, what `.ci/run` checks beside the tests: every crate meant for crates.io
/// packaged and built from its tarball, as a user would get it (the
/// workspace's unpublished dependencies stand in for the registry's), and
/// the two builds outside the workspace — the fuzz targets and the
/// comparison harness — still compiling.
pub(crate) fn package() -> Result<()> {
    forget_unpacked()?;
    run(
        &cargo(),
        &[
            "package",
            "--workspace",
            "--target-dir",
            VERIFY_DIR,
            // The tree as it is: checked before a commit as after it.
            "--allow-dirty",
            "--exclude",
            "memgroup-testkit",
            "--exclude",
            "xtask",
        ],
        &[],
    )?;
    for manifest in ["fuzz/Cargo.toml", "bench-compare/Cargo.toml"] {
        let manifest = root().join(manifest);
        let manifest = manifest.to_str().ok_or("a non-UTF-8 path")?;
        run(
            &cargo(),
            &["check", "--manifest-path", manifest, "--all-targets"],
            &[],
        )?;
    }
    Ok(())
}

/// Where the packages are built to be verified: a target directory of its
/// own, so that what is forgotten below is only this step's.
const VERIFY_DIR: &str = "target/package-verify";

/// Removes what an earlier run unpacked and built of this workspace's
/// crates: cargo verifies a crate against its dependencies packaged beside
/// it, as a local registry's crates unpacked under
/// `$CARGO_HOME/registry/src/-<hash>`, and takes an unpacked or built
/// registry crate of the same version as unchanged: a module added since
/// then was "not found".
fn forget_unpacked() -> Result<()> {
    let verify = root().join(VERIFY_DIR);
    let _ = std::fs::remove_dir_all(verify.join("package"));
    for dir in [".fingerprint", "deps", "build"] {
        for built in std::fs::read_dir(verify.join("debug").join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = built.file_name().to_string_lossy().into_owned();
            if name.starts_with("memgroup") || name.starts_with("libmemgroup") {
                let _ = std::fs::remove_dir_all(built.path())
                    .or_else(|_| std::fs::remove_file(built.path()));
            }
        }
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let Ok(registries) = std::fs::read_dir(home.join("registry/src")) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        // A local registry's directory name starts with '-'; crates.io's does not.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for unpacked in std::fs::read_dir(registry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if unpacked
                .file_name()
                .to_string_lossy()
                .starts_with("memgroup")
            {
                std::fs::remove_dir_all(unpacked.path()).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}
