fn main() {
    println!("cargo:rerun-if-changed=catalog/capabilities.toml");
}
