use clap::Parser;
use companiond_core::options::Cli;

fn main() {
    let cli = Cli::parse();
    companiond_core::server::init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("companiond: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(companiond_core::server::run(
        cli.into_serve(),
        companiond::FAMILIES,
    ));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(code);
}
