//! serde support of `json::Value`: lossless round trips through the Value serializer and
//! deserializer (key order, number spellings), `serde_json` interop, bounded nesting, and
//! refusals that name the path.

use std::collections::BTreeMap;

use proptest::prelude::*;
use session_core::json::{self, SERDE_MAX_DEPTH, SerdeErrorKind, Value};

/// Text with every kind of number spelling the parser keeps, index keys, duplicate keys and
/// escapes.
const TRICKY: &str = r#"{"b":[1.0,1E5,-0,9007199254740993,1e400,0.10,-1.5e-7,12],"2":{"z":null,"a":true},"b2":"\u0001/\u2028","0":[],"x":{},"b":"last"}"#;

#[test]
fn value_round_trips_through_its_own_serializer_and_deserializer() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Holder {
        inner: Value,
        list: Vec<Value>,
    }
    let v = Value::parse(TRICKY).unwrap();
    let ser = json::to_value(&v).unwrap();
    assert_eq!(ser.to_json(), v.to_json());
    assert_eq!(ser, v);
    let de: Value = json::from_value(&v).unwrap();
    assert_eq!(de.to_json(), v.to_json());
    // Numbers directly in serde types keep their spelling too; an offer never outlives its
    // call (a plain float of the same value afterwards is written in JavaScript spelling).
    let numbers: Vec<Value> = json::from_value(&Value::parse("[1.0,-0,1E5]").unwrap()).unwrap();
    assert_eq!(json::to_value(&numbers).unwrap().to_json(), "[1.0,-0,1E5]");
    assert_eq!(json::to_value(&1.0f64).unwrap().to_json(), "1");
    assert_eq!(
        json::to_value(&[100_000.0f64]).unwrap().to_json(),
        "[100000]"
    );
    let plain: Vec<f64> = json::from_value(&Value::parse("[1.0,1E5]").unwrap()).unwrap();
    assert_eq!(json::to_value(&plain).unwrap().to_json(), "[1,100000]");
    // Whole values are shared, not copied.
    assert!(ser.ptr_eq(&v) && de.ptr_eq(&v));
    let event = session_core::Event::appended("x/y", 0, 0, v.clone(), None, None);
    assert!(event.data_as::<Value>().unwrap().ptr_eq(event.data()));
    // Through a user type holding Values.
    let holder: Holder = json::from_value(&Value::object([
        ("inner", v.clone()),
        ("list", Value::array([v.clone(), Value::Null])),
    ]))
    .unwrap();
    assert_eq!(holder.inner.to_json(), v.to_json());
    assert_eq!(holder.list[0].to_json(), v.to_json());
    let back = json::to_value(&holder).unwrap();
    assert_eq!(back.get("inner").unwrap().to_json(), v.to_json());
}

#[test]
fn serde_json_sees_values_and_keeps_key_order() {
    // preserve_order serde_json writes what the reference writes for canonical values.
    let text = r#"{"2":1,"b":[1,-2,0.5,"x\n"],"a":{"k":null}}"#;
    let v = Value::parse(text).unwrap();
    assert_eq!(serde_json::to_string(&v).unwrap(), text);
    let back: Value = serde_json::from_str(text).unwrap();
    assert_eq!(back.to_json(), text);
    // serde_json's own order is re-sorted by the JavaScript rule on the way in.
    let back: Value = serde_json::from_str(r#"{"b":1,"7":2}"#).unwrap();
    assert_eq!(back.to_json(), r#"{"7":2,"b":1}"#);
    // Integers beyond the safe range keep their digits; -0 stays -0.
    let back: Value = serde_json::from_str("[18446744073709551615,-0.0]").unwrap();
    assert_eq!(back.to_json(), "[18446744073709551615,-0]");
    // An arbitrary_precision number token is read as the exact literal.
    let token = serde_json::json!({"$serde_json::private::Number": "1.50"});
    let back: Value = serde_json::from_value(token).unwrap();
    assert_eq!(back.to_json(), "1.50");
    // A number outside the double range is an error for serde_json, not a silent null.
    let inf = Value::parse("[1e400]").unwrap();
    let err = serde_json::to_string(&inf).unwrap_err();
    assert!(err.to_string().contains("1e400"), "{err}");
}

#[test]
fn nesting_is_bounded_in_every_direction() {
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Tree(Vec<Tree>);
    let depth = SERDE_MAX_DEPTH * 50;
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let deep = Value::parse(&text).unwrap();
    // A Value passes whole (shared, O(1)) through the Value serializer and deserializer.
    assert!(json::to_value(&deep).unwrap().ptr_eq(&deep));
    assert!(json::from_value::<Value>(&deep).unwrap().ptr_eq(&deep));
    // A recursive type is refused past the limit, with the path to it.
    let err = json::from_value::<Tree>(&deep).err().expect("too deep");
    assert_eq!(err.kind(), &SerdeErrorKind::TooDeep);
    assert_eq!(err.path().count(), SERDE_MAX_DEPTH);
    // Other formats: serde_json output and input stop at the limit instead of overflowing.
    assert!(serde_json::to_string(&deep).is_err());
    assert!(serde_json::from_str::<Value>(&text).is_err());
    // Exactly at the limit works.
    let ok = Value::parse(&format!(
        "{}{}",
        "[".repeat(SERDE_MAX_DEPTH),
        "]".repeat(SERDE_MAX_DEPTH)
    ))
    .unwrap();
    assert_eq!(serde_json::to_string(&ok).unwrap(), ok.to_json());
    let tree: Tree = json::from_value(&ok).unwrap();
    assert_eq!(json::to_value(&tree).unwrap(), ok);
}

#[test]
fn building_values_refuses_what_append_refuses() {
    #[derive(serde::Serialize)]
    struct S {
        a: Vec<f64>,
        b: Option<u64>,
        c: BTreeMap<u8, i64>,
    }
    let err = |s: S| json::to_value(&s).unwrap_err();
    let e = err(S {
        a: vec![1.0, -0.0],
        b: None,
        c: BTreeMap::default(),
    });
    assert_eq!(
        (e.kind(), e.pointer().as_str()),
        (&SerdeErrorKind::NegativeZero, "/a/1")
    );
    let e = err(S {
        a: vec![f64::INFINITY],
        b: None,
        c: BTreeMap::default(),
    });
    assert_eq!(
        (e.kind(), e.pointer().as_str()),
        (&SerdeErrorKind::NonFinite, "/a/0")
    );
    let e = err(S {
        a: vec![1e18],
        b: None,
        c: BTreeMap::default(),
    });
    assert!(matches!(e.kind(), SerdeErrorKind::UnsafeInteger(_)), "{e}");
    let e = err(S {
        a: vec![],
        b: Some(1 << 53),
        c: BTreeMap::default(),
    });
    assert_eq!(
        e.to_string(),
        "integer 9007199254740992 is outside the safe range ±(2^53 − 1) at /b"
    );
    let ok = json::to_value(&S {
        a: vec![0.5, 1e300],
        b: Some((1 << 53) - 1),
        c: [(3, -4), (1, 2)].into_iter().collect(),
    })
    .unwrap();
    assert_eq!(
        ok.to_json(),
        r#"{"a":[0.5,1e+300],"b":9007199254740991,"c":{"1":2,"3":-4}}"#
    );
}

/// JSON text whose numbers use spellings JavaScript would not write.
fn json_text() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<i32>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        Just("1.0".to_owned()),
        Just("-0".to_owned()),
        Just("9007199254740993".to_owned()),
        Just("1E400".to_owned()),
    ];
    let leaf = prop_oneof![
        number,
        Just("null".to_owned()),
        Just("true".to_owned()),
        "[a-z0-9]{0,3}".prop_map(|s| format!("{s:?}")),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-c0-2]{1,2}", inner), 0..5).prop_map(|v| {
                let fields: Vec<String> = v.iter().map(|(k, v)| format!("{k:?}:{v}")).collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
}

proptest! {
    #[test]
    fn any_parsed_value_round_trips_losslessly(text in json_text()) {
        let v = Value::parse(&text).unwrap();
        let ser = json::to_value(&v).unwrap();
        prop_assert_eq!(ser.to_json(), v.to_json());
        let de: Value = json::from_value(&v).unwrap();
        prop_assert_eq!(de.to_json(), v.to_json());
        // Element by element: a serde sequence of Values, and serde_json text read back.
        let pair = Value::array([v.clone(), v.clone()]);
        let items: Vec<Value> = json::from_value(&pair).unwrap();
        prop_assert_eq!(json::to_value(&items).unwrap().to_json(), pair.to_json());
        // serde_json writes values: equal numbers, same keys in the same order. (Read back
        // with the lossless parser: serde_json's own float parsing is not correctly rounded
        // without its `float_roundtrip` feature.)
        if let Ok(text) = serde_json::to_string(&v) {
            prop_assert_eq!(Value::parse(&text).unwrap(), v);
        }
    }
}
