fn main() {
    foveal_sdk_build::embed_source();
}
