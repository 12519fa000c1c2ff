// Where libtokenstore-gobject-1 is: TOKENSTORE_GOBJECT_LIBDIR (a build tree: make test-gnome
// sets it), else pkg-config's libdir of tokenstore-gobject-1 (an installed library).
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TOKENSTORE_GOBJECT_LIBDIR");
    let libdir = match std::env::var("TOKENSTORE_GOBJECT_LIBDIR") {
        Ok(dir) => dir,
        Err(_) => {
            let output = Command::new("pkg-config")
                .args(["--variable=libdir", "tokenstore-gobject-1"])
                .output()
                .expect("pkg-config: is it installed?");
            if !output.status.success() {
                panic!("pkg-config finds no tokenstore-gobject-1: install libtokenstore-dev or set TOKENSTORE_GOBJECT_LIBDIR");
            }
            String::from_utf8(output.stdout).expect("pkg-config printed UTF-8").trim().to_string()
        }
    };
    println!("cargo:rustc-link-search=native={}", libdir);
}
