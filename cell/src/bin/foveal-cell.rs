//! `foveal-cell`: one skill library, confined, serving its hooks to the
//! host that started it. Not for running by hand: the host starts it with
//! the channel as descriptor 3 (see `foveal_cell::serve`).

fn main() {
    if std::env::args_os().len() > 1 {
        eprintln!(
            "foveal-cell is started by the foveal host to run one skill in a confined process; it takes no arguments"
        );
        std::process::exit(2);
    }
    foveal_cell::serve::main()
}
