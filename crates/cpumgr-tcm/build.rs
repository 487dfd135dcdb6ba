//! Gives `libtcm.so` the soname oneTBB asks for (`libtcm.so.1`: its loader first looks for an
//! already loaded library of that name, so a preloaded `libtcm.so` is the one it uses), and puts a
//! `libtcm.so.1` link beside it in the profile directory for programs that load it by that name.

use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtcm.so.1");
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is target/PROFILE/build/cpumgr-tcm-HASH/out: the library lands in target/PROFILE.
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else { return };
    let Some(profile) = out.ancestors().nth(3) else { return };
    let link = profile.join("libtcm.so.1");
    if std::fs::symlink_metadata(&link).is_err() {
        // Relative, so the pair can be copied or installed together; dangling until the first link.
        let _ = std::os::unix::fs::symlink("libtcm.so", &link);
    }
}
