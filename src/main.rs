use clap::Parser;
use companiond_core::options::{Cli, Command};

fn main() {
    companiond_core::alloc::tune();
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Backup(a)) => std::process::exit(companiond_core::backup::run_backup(a)),
        Some(Command::Restore(a)) => std::process::exit(companiond_core::backup::run_restore(a)),
        Some(Command::Model(a)) => std::process::exit(companiond_local::cli::run(a)),
        _ => {}
    }
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
