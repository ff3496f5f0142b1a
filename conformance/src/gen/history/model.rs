//! The model's output in a generated history: final assistant messages and streamed chunks.

use super::{AssistantSpec, BlockSpec, Builder, Call, Record, StreamSpec, TOOL_NAMES, Value, s, u};

impl Builder {
    pub(super) fn model_source(&self) -> Value {
        Value::object([
            ("kind", s("model")),
            ("provider", s(self.provider)),
            ("model", s(self.model)),
        ])
    }

    pub(super) fn usage(usage: Option<(u32, u32)>) -> Option<Value> {
        usage.map(|(i, o)| {
            Value::object([
                ("inputTokens", Value::from(i)),
                ("outputTokens", Value::from(o)),
            ])
        })
    }

    /// The final content block of a block spec, registering tool calls.
    pub(super) fn final_block(&mut self, spec: &BlockSpec) -> (Value, Option<Call>) {
        match spec {
            BlockSpec::Text(pieces) => (
                Value::object([("type", s("text")), ("text", s(&pieces.concat()))]),
                None,
            ),
            BlockSpec::Reasoning(pieces) => (
                Value::object([("type", s("reasoning")), ("text", s(&pieces.concat()))]),
                None,
            ),
            BlockSpec::ToolCall { name, args, .. } => {
                let call = Call {
                    id: self.next_id("call"),
                    name: TOOL_NAMES[usize::from(*name) % TOOL_NAMES.len()].to_owned(),
                    arguments: args.concat(),
                    recorded_at: None,
                };
                (
                    Value::object([
                        ("type", s("tool-call")),
                        ("id", s(&call.id)),
                        ("name", s(&call.name)),
                        ("arguments", s(&call.arguments)),
                    ]),
                    Some(call),
                )
            }
        }
    }

    pub(super) fn assistant_record(
        &mut self,
        turn: u64,
        step: u64,
        content: Vec<Value>,
        usage: Option<Value>,
    ) -> Record {
        let id = self.next_id("asst");
        let message = Value::object([
            ("id", s(&id)),
            ("role", s("assistant")),
            ("content", Value::array(content)),
            ("source", self.model_source()),
        ]);
        let mut data = vec![("turn", u(turn)), ("step", u(step)), ("message", message)];
        if let Some(usage) = usage {
            data.push(("usage", usage));
        }
        Record::new("assistant/message", Value::object(data))
    }

    pub(super) fn chunk(&mut self, turn: u64, step: u64, chunk: Value) -> u64 {
        self.push(Record::new(
            "assistant/chunk",
            Value::object([("turn", u(turn)), ("step", u(step)), ("chunk", chunk)]),
        ))
    }

    pub(super) fn deltas(index: usize, spec: &BlockSpec, call: Option<&Call>) -> Vec<Value> {
        let idx = u(index as u64);
        match (spec, call) {
            (BlockSpec::Text(pieces), _) => pieces
                .iter()
                .map(|p| {
                    Value::object([
                        ("type", s("text-delta")),
                        ("index", idx.clone()),
                        ("text", s(p)),
                    ])
                })
                .collect(),
            (BlockSpec::Reasoning(pieces), _) => pieces
                .iter()
                .map(|p| {
                    Value::object([
                        ("type", s("reasoning-delta")),
                        ("index", idx.clone()),
                        ("text", s(p)),
                    ])
                })
                .collect(),
            (
                BlockSpec::ToolCall {
                    args, name_mode, ..
                },
                Some(call),
            ) => args
                .iter()
                .enumerate()
                .map(|(k, a)| {
                    let mut entries = vec![
                        ("type", s("tool-call-delta")),
                        ("index", idx.clone()),
                        ("id", s(&call.id)),
                    ];
                    if *name_mode == 0 || (*name_mode == 1 && k == 0) {
                        entries.push(("name", s(&call.name)));
                    }
                    entries.push(("argumentsDelta", s(a)));
                    Value::object(entries)
                })
                .collect(),
            (BlockSpec::ToolCall { .. }, None) => Vec::new(),
        }
    }

    pub(super) fn block_type(spec: &BlockSpec) -> &'static str {
        match spec {
            BlockSpec::Text(_) => "text",
            BlockSpec::Reasoning(_) => "reasoning",
            BlockSpec::ToolCall { .. } => "tool-call",
        }
    }

    pub(super) fn stream(&mut self, spec: &StreamSpec) {
        if spec.cite == 3 {
            self.assistant(&AssistantSpec {
                blocks: spec.blocks.clone(),
                usage: spec.usage,
            });
            return;
        }
        let (turn, step) = self.ensure_step();
        let mut finals = Vec::new();
        let mut calls = Vec::new();
        for b in &spec.blocks {
            let (block, call) = self.final_block(b);
            finals.push(block);
            calls.push(call);
        }
        let starts: Vec<Value> = spec
            .blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                Value::object([
                    ("type", s("block-start")),
                    ("index", u(i as u64)),
                    ("blockType", s(Self::block_type(b))),
                ])
            })
            .collect();
        let deltas: Vec<Vec<Value>> = spec
            .blocks
            .iter()
            .enumerate()
            .map(|(i, b)| Self::deltas(i, b, calls[i].as_ref()))
            .collect();
        let ends: Vec<Value> = finals
            .iter()
            .enumerate()
            .map(|(i, block)| {
                Value::object([
                    ("type", s("block-end")),
                    ("index", u(i as u64)),
                    ("block", block.clone()),
                ])
            })
            .collect();
        let mut chunks: Vec<Value> = Vec::new();
        if spec.interleave {
            chunks.extend(starts);
            let longest = deltas.iter().map(Vec::len).max().unwrap_or(0);
            for k in 0..longest {
                for d in &deltas {
                    if let Some(c) = d.get(k) {
                        chunks.push(c.clone());
                    }
                }
            }
            chunks.extend(ends);
        } else {
            for ((start, d), end) in starts.into_iter().zip(deltas).zip(ends) {
                chunks.push(start);
                chunks.extend(d);
                chunks.push(end);
            }
        }
        let usage = Self::usage(spec.usage);
        if let Some(usage) = &usage {
            chunks.push(Value::object([
                ("type", s("usage")),
                ("usage", usage.clone()),
            ]));
        }
        let has_calls = calls.iter().any(Option::is_some);
        let finish = if has_calls {
            "tool-calls"
        } else if spec.finish == 1 {
            "max-tokens"
        } else {
            "stop"
        };
        chunks.push(Value::object([
            ("type", s("finish")),
            ("reason", Value::object([("kind", s(finish))])),
        ]));
        let mut seqs = Vec::new();
        for c in chunks {
            seqs.push(self.chunk(turn, step, c));
        }
        let mut record = self.assistant_record(turn, step, finals, usage).append();
        match spec.cite {
            0 => record = record.sources(&seqs),
            1 => record = record.sources(&[]),
            _ => {}
        }
        self.push(record);
        self.announced.extend(calls.into_iter().flatten());
    }

    pub(super) fn assistant(&mut self, spec: &AssistantSpec) {
        let (turn, step) = self.ensure_step();
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for b in &spec.blocks {
            let (block, call) = self.final_block(b);
            content.push(block);
            calls.extend(call);
        }
        let usage = Self::usage(spec.usage);
        let record = self.assistant_record(turn, step, content, usage).append();
        self.push(record);
        self.announced.extend(calls);
    }
}
