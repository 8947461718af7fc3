//! Fuzz target: reading a model file never panics; a model that is accepted passes its
//! range and order checks, and writes back to a file that reads to the same model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.model");
    if let Ok(m) = analyzer::model::Model::from_json(path, text) {
        analyzer::model_check::check_model(&m).expect("an accepted model is in range");
        let again = analyzer::model::Model::from_json(path, &m.to_json())
            .expect("a written model reads back");
        assert_eq!(again.node_count(), m.node_count());
        assert_eq!(again.to_json(), m.to_json());
    }
});
