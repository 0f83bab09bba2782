fn main() -> std::process::ExitCode {
    saphan::cli::main()
}
