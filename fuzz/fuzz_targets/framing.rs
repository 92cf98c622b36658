//! stdio framing: the message-size bound over bytes that arrive in any chunks agrees with
//! the obvious rule — refused exactly when some line is longer than the bound, and otherwise
//! ending on the length of the unfinished last line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::fuzzing::advance_line;

fuzz_target!(|data: &[u8]| {
    let Some((&max, rest)) = data.split_first() else {
        return;
    };
    let max = usize::from(max % 64);
    let Some((&cut, bytes)) = rest.split_first() else {
        return;
    };
    // The bytes in chunks of a size the input chooses.
    let size = usize::from(cut % 16) + 1;
    let mut current = Some(0);
    for chunk in bytes.chunks(size) {
        current = current.and_then(|current| advance_line(current, chunk, max));
    }
    let too_long = bytes
        .split(|byte| *byte == b'\n')
        .any(|line| line.len() > max);
    let last = bytes
        .split(|byte| *byte == b'\n')
        .last()
        .map_or(0, <[u8]>::len);
    match current {
        None => assert!(too_long, "refused, but no line is longer than {max}"),
        Some(current) => {
            assert!(!too_long, "a line longer than {max} passed");
            assert_eq!(current, last);
        }
    }
});
