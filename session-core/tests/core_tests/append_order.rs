//! `Event::in_append_order` of compact chunk members (which it returns as they are, without
//! building their `data`) gives the JSON of the general path: the envelope rebuilt in the
//! live-append key order.

use session_core::chunk_rows::StorageDecoder;
use session_core::{Event, KeyOrder};

#[test]
fn a_chunk_members_append_order_copy_is_the_general_paths() {
    let mut decoder = StorageDecoder::new();
    for line in [
        &br#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#[..],
        br#"{"seq":7,"type":"assistant/chunk","time":20,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"d"}}}"#,
        br#"{"type":"assistant/chunk","seq":8,"time":21,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c","argumentsDelta":"{"}}}"#,
    ] {
        decoder.decode_line(line);
    }
    let events = decoder.take_events();
    assert_eq!(events.len(), 5);
    for e in &events {
        let general = Event::from_parts(e.to_parts(), KeyOrder::APPEND);
        assert_eq!(
            e.in_append_order().to_json(),
            general.to_json(),
            "seq {}",
            e.seq()
        );
    }
}
