//! The abstract steps a random history is made of, and their strategies.
//!
//! An action carries only random choices (texts, selectors, flags); [`super::Builder`] turns a
//! list of actions into concrete drafts against a model of the session, so every choice maps
//! onto something valid in the state the history has reached. Shrinking works on the action
//! list.

use proptest::collection::vec;
use proptest::prelude::*;
use session_core::json::Value;

use super::json::{arb_json, arb_text};

/// One step of a random history.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// A `user/message` append (direct prompt or injected plugin context).
    User(UserSpec),
    /// `turn/start` when no turn is open.
    TurnStart,
    /// `turn/end` (closing an open step first) when a turn is open.
    TurnEnd(u8),
    /// `step/start`, opening a turn first and closing an open step.
    StepStart,
    /// `step/end` when a step is open.
    StepEnd,
    /// A streamed model answer: chunks, then the `assistant/message` citing them.
    Stream(StreamSpec),
    /// An `assistant/message` without chunks.
    Assistant(AssistantSpec),
    /// `tool/call` for an announced tool-call block of the open step.
    ToolCall(usize),
    /// `tool/result` (append) for a recorded `tool/call` of the open step.
    ToolResult(ToolResultSpec),
    /// A model answer with tool calls, then `tool/call` and `tool/result` for some of them.
    ToolRound(ToolRoundSpec),
    /// `request/header` with a valid configuration.
    Header(HeaderSpec),
    /// `request/context` (inside a turn).
    Context(ContextSpec),
    /// A compaction: a `user/message` or `assistant/message` replacing a surface range.
    Compact(CompactSpec),
    /// A tool-result rewrite: a `tool/result` replacing one `tool/result` node, changing only
    /// `content[0].content`.
    Rewrite(RewriteSpec),
    /// A plugin event (an unknown type, or a known log-only one).
    Plugin(PluginSpec),
    /// A read of every derived view at this point.
    Read,
    /// A fork point (taken only at a closed-turn boundary).
    Fork,
    /// A change of the wall clock (may go backwards).
    Tick(i64),
}

#[derive(Debug, Clone)]
pub(crate) struct UserSpec {
    pub(crate) texts: Vec<String>,
    pub(crate) source: u8,
    pub(crate) sources: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(crate) enum BlockSpec {
    Text(Vec<String>),
    Reasoning(Vec<String>),
    ToolCall {
        name: u8,
        args: Vec<String>,
        /// 0: name on every delta, 1: on the first only, 2: never.
        name_mode: u8,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct StreamSpec {
    pub(crate) blocks: Vec<BlockSpec>,
    pub(crate) interleave: bool,
    pub(crate) usage: Option<(u32, u32)>,
    pub(crate) finish: u8,
    /// 0: cite every chunk, 1: cite nothing (`[]`), 2: no `sourceEventSeqs`; 3: no chunks
    /// at all (the message alone).
    pub(crate) cite: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct AssistantSpec {
    pub(crate) blocks: Vec<BlockSpec>,
    pub(crate) usage: Option<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub(crate) struct ToolResultSpec {
    pub(crate) pick: usize,
    pub(crate) text: String,
    /// 0: no `isError`, 1: `false`, 2: `true` with an `error`.
    pub(crate) error_mode: u8,
    pub(crate) meta: Option<Value>,
    pub(crate) cite: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct ToolRoundSpec {
    pub(crate) stream: StreamSpec,
    /// Per call: whether a `tool/call` is recorded, and the result (if answered).
    pub(crate) calls: Vec<(bool, Option<ToolResultSpec>)>,
}

#[derive(Debug, Clone)]
pub(crate) struct HeaderSpec {
    pub(crate) provider: u8,
    pub(crate) model: u8,
    pub(crate) reasoning_effort: Option<u8>,
    pub(crate) temperature: Option<u8>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) stop: Option<Vec<String>>,
    pub(crate) adapter_defaults: u8,
    pub(crate) system: Option<String>,
    pub(crate) tools: Vec<u8>,
    pub(crate) reason: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct ContextSpec {
    pub(crate) provider: u8,
    pub(crate) model: u8,
    pub(crate) context_window: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompactSpec {
    pub(crate) by_assistant: bool,
    pub(crate) start: usize,
    pub(crate) width: usize,
    pub(crate) extra: Vec<usize>,
    pub(crate) reverse: bool,
    pub(crate) summary: String,
    pub(crate) empty: bool,
    /// Bit 0: a `compaction/summary` record first (cited in the sources); bit 1: a
    /// `session/title` citing surface nodes after it; bit 2: a `command/done` naming it.
    pub(crate) bookkeeping: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct RewriteSpec {
    pub(crate) pick: usize,
    pub(crate) text: String,
    pub(crate) extra: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct PluginSpec {
    pub(crate) kind: u8,
    pub(crate) name: String,
    pub(crate) data: Value,
}

fn arb_pieces() -> impl Strategy<Value = Vec<String>> {
    vec(prop_oneof![4 => "[a-z ]{0,4}", 1 => arb_text()], 1..7)
}

fn arb_block() -> impl Strategy<Value = BlockSpec> {
    prop_oneof![
        3 => arb_pieces().prop_map(BlockSpec::Text),
        2 => arb_pieces().prop_map(BlockSpec::Reasoning),
        2 => (any::<u8>(), vec("[a-z{}\":, 0-9]{0,5}", 0..7), 0u8..3)
            .prop_map(|(name, args, name_mode)| BlockSpec::ToolCall { name, args, name_mode }),
    ]
}

fn arb_usage() -> impl Strategy<Value = Option<(u32, u32)>> {
    proptest::option::of((0u32..100_000, 0u32..10_000))
}

fn arb_stream() -> impl Strategy<Value = StreamSpec> {
    (
        vec(arb_block(), 0..4),
        any::<bool>(),
        arb_usage(),
        0u8..3,
        prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(blocks, interleave, usage, finish, cite)| StreamSpec {
            blocks,
            interleave,
            usage,
            finish,
            cite,
        })
}

fn arb_tool_result() -> impl Strategy<Value = ToolResultSpec> {
    (
        any::<usize>(),
        arb_text(),
        0u8..3,
        proptest::option::of(arb_json()),
        any::<bool>(),
    )
        .prop_map(|(pick, text, error_mode, meta, cite)| ToolResultSpec {
            pick,
            text,
            error_mode,
            meta,
            cite,
        })
}

fn arb_tool_round() -> impl Strategy<Value = ToolRoundSpec> {
    (
        arb_stream(),
        vec(
            (any::<u8>(), vec("[a-z{}\":, 0-9]{0,5}", 0..4), 0u8..3),
            1..4,
        ),
        vec(
            (
                prop::bool::weighted(0.85),
                proptest::option::weighted(0.8, arb_tool_result()),
            ),
            3,
        ),
        any::<bool>(),
    )
        .prop_map(|(mut stream, tools, calls, chunked)| {
            // Text and reasoning blocks first, then one tool-call block per call.
            stream
                .blocks
                .retain(|b| !matches!(b, BlockSpec::ToolCall { .. }));
            stream.blocks.truncate(1);
            let n = tools.len();
            stream
                .blocks
                .extend(
                    tools
                        .into_iter()
                        .map(|(name, args, name_mode)| BlockSpec::ToolCall {
                            name,
                            args,
                            name_mode,
                        }),
                );
            if !chunked {
                stream.cite = 3;
            }
            ToolRoundSpec {
                stream,
                calls: calls.into_iter().take(n).collect(),
            }
        })
}

fn arb_header() -> impl Strategy<Value = HeaderSpec> {
    (
        (
            0u8..3,
            0u8..3,
            proptest::option::of(0u8..3),
            proptest::option::of(0u8..5),
        ),
        (
            proptest::option::of(1u32..65_536),
            proptest::option::of(vec("[A-Z]{1,4}", 0..3)),
            0u8..4,
        ),
        (
            proptest::option::of(prop_oneof![Just(String::new()), arb_text()]),
            vec(0u8..4, 0..3),
            0u8..3,
        ),
    )
        .prop_map(
            |(
                (provider, model, reasoning_effort, temperature),
                (max_tokens, stop, adapter_defaults),
                (system, tools, reason),
            )| HeaderSpec {
                provider,
                model,
                reasoning_effort,
                temperature,
                max_tokens,
                stop,
                adapter_defaults,
                system,
                tools,
                reason,
            },
        )
}

/// A compaction (see [`CompactSpec`]).
pub(crate) fn arb_compact() -> impl Strategy<Value = Action> {
    (
        (
            any::<bool>(),
            any::<usize>(),
            0usize..6,
            vec(any::<usize>(), 0..3),
        ),
        (
            any::<bool>(),
            arb_text(),
            prop::bool::weighted(0.15),
            0u8..8,
        ),
    )
        .prop_map(
            |((by_assistant, start, width, extra), (reverse, summary, empty, bookkeeping))| {
                Action::Compact(CompactSpec {
                    by_assistant,
                    start,
                    width,
                    extra,
                    reverse,
                    summary,
                    empty,
                    bookkeeping,
                })
            },
        )
}

/// Actions of a history rich in compactions: one in three compacts, the rest as
/// [`arb_action`] draws them, so compactions nest (a range covering earlier summaries),
/// overlap (a range covering part of a summary's neighbours) and are followed by later turns.
pub(crate) fn arb_compacting_action() -> impl Strategy<Value = Action> {
    prop_oneof![2 => arb_action(), 1 => arb_compact()]
}

/// One random action, weighted towards the shapes real sessions have.
pub(crate) fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (vec(arb_text(), 1..3), 0u8..4, vec(any::<usize>(), 0..3))
            .prop_map(|(texts, source, sources)| Action::User(UserSpec { texts, source, sources })),
        3 => Just(Action::TurnStart),
        5 => (0u8..6).prop_map(Action::TurnEnd),
        3 => Just(Action::StepStart),
        2 => Just(Action::StepEnd),
        4 => arb_stream().prop_map(Action::Stream),
        2 => (vec(arb_block(), 0..3), arb_usage())
            .prop_map(|(blocks, usage)| Action::Assistant(AssistantSpec { blocks, usage })),
        3 => any::<usize>().prop_map(Action::ToolCall),
        2 => arb_tool_result().prop_map(Action::ToolResult),
        5 => arb_tool_round().prop_map(Action::ToolRound),
        1 => arb_header().prop_map(Action::Header),
        1 => (0u8..3, 0u8..3, proptest::option::of(1u32..1_000_000))
            .prop_map(|(provider, model, context_window)| {
                Action::Context(ContextSpec { provider, model, context_window })
            }),
        2 => arb_compact(),
        2 => (any::<usize>(), arb_text(), vec(any::<usize>(), 0..2))
            .prop_map(|(pick, text, extra)| Action::Rewrite(RewriteSpec { pick, text, extra })),
        2 => (0u8..6, "[a-z]{1,8}", arb_json())
            .prop_map(|(kind, name, data)| Action::Plugin(PluginSpec { kind, name, data })),
        2 => Just(Action::Read),
        2 => Just(Action::Fork),
        1 => prop_oneof![4 => 0i64..50, 1 => -5_000i64..0, 1 => 0i64..100_000_000]
            .prop_map(Action::Tick),
    ]
}
