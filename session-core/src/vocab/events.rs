//! Turn and step boundaries, assistant messages and chunks, tool calls and results, usage.

use crate::json::Value;
use crate::vocab::message::{Bare, ContentBlock, Message};

vocab_struct! {
    /// `turn/start` data: `{turn}`.
    pub struct TurnStart {
        /// The turn number (from 1).
        turn: req u64 = "turn",
    }
}

vocab_struct! {
    /// `turn/end` data: `{turn, reason}`.
    pub struct TurnEnd {
        /// The turn number.
        turn: req u64 = "turn",
        /// Why the turn ended.
        reason: req TurnEndReason = "reason",
    }
}

vocab_enum! {
    /// Why a turn ended (an open set, tagged by `kind`).
    pub enum TurnEndReason tag "kind" default Completed {
        /// `{kind:"completed"}`.
        Completed(Bare) = "completed",
        /// `{kind:"aborted", reason}`.
        Aborted(Aborted) = "aborted",
        /// `{kind:"blocked"}`.
        Blocked(Bare) = "blocked",
        /// `{kind:"error", error}`.
        Error(TurnError) = "error",
        /// `{kind:"max-tokens"}`.
        MaxTokens(Bare) = "max-tokens",
        /// `{kind:"interrupted"}`: only crash repair writes it.
        Interrupted(Bare) = "interrupted",
    }
}

vocab_struct! {
    /// The fields of an aborted turn's reason.
    pub struct Aborted {
        /// Who cancelled.
        reason: req CancelCause = "reason",
    }
}

vocab_struct! {
    /// The fields of a failed turn's reason.
    pub struct TurnError {
        /// The failure.
        error: req LlmFailure = "error",
    }
}

vocab_enum! {
    /// Who cancelled a turn (tagged by `kind`).
    pub enum CancelCause tag "kind" default User {
        /// `{kind:"user"}`.
        User(Bare) = "user",
        /// `{kind:"parent"}`.
        Parent(Bare) = "parent",
        /// `{kind:"hook", reason}`.
        Hook(HookCause) = "hook",
        /// `{kind:"disposed"}`.
        Disposed(Bare) = "disposed",
        /// `{kind:"legacy"}`.
        Legacy(Bare) = "legacy",
    }
}

vocab_struct! {
    /// The fields of a hook's cancellation.
    pub struct HookCause {
        /// The hook's reason.
        reason: req String = "reason",
    }
}

vocab_struct! {
    /// A model call's failure: `{message, code, status?, providerRetryAfterMs?, requestId?}`.
    pub struct LlmFailure {
        /// The message.
        message: req String = "message",
        /// The failure code (for example `AUTH`).
        code: req String = "code",
        /// The HTTP status.
        status: opt u64 = "status",
        /// The provider's retry hint in milliseconds.
        provider_retry_after_ms: opt u64 = "providerRetryAfterMs",
        /// The provider's request id.
        request_id: opt String = "requestId",
    }
}

vocab_struct! {
    /// `step/start` data: `{turn, step}`.
    pub struct StepStart {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number within the turn (from 1).
        step: req u64 = "step",
    }
}

vocab_struct! {
    /// `step/end` data: `{turn, step}`.
    pub struct StepEnd {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number within the turn.
        step: req u64 = "step",
    }
}

vocab_struct! {
    /// Token usage: `{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?,
    /// reasoningTokens?}`.
    pub struct Usage {
        /// Prompt tokens.
        input_tokens: req u64 = "inputTokens",
        /// Completion tokens.
        output_tokens: req u64 = "outputTokens",
        /// Prompt tokens read from the cache.
        cache_read_tokens: opt u64 = "cacheReadTokens",
        /// Prompt tokens written to the cache.
        cache_write_tokens: opt u64 = "cacheWriteTokens",
        /// Reasoning tokens.
        reasoning_tokens: opt u64 = "reasoningTokens",
    }
}

vocab_struct! {
    /// `assistant/message` data: `{turn, step, message, usage?, interrupted?}`.
    pub struct AssistantMessageData {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number.
        step: req u64 = "step",
        /// The assistant's message (role `assistant`, a model source).
        message: req Message = "message",
        /// The step's token usage.
        usage: opt Usage = "usage",
        /// `true` when the stream was cut.
        interrupted: opt bool = "interrupted",
    }
}

vocab_struct! {
    /// `tool/call` data: `{turn, step, callId, name, arguments}`.
    pub struct ToolCall {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number.
        step: req u64 = "step",
        /// The call id.
        call_id: req String = "callId",
        /// The tool name.
        name: req String = "name",
        /// The raw, unparsed JSON arguments the model produced.
        arguments: req String = "arguments",
    }
}

vocab_struct! {
    /// `tool/result` data: `{turn, step, message, error?, meta?}`.
    pub struct ToolResultData {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number.
        step: req u64 = "step",
        /// The result message (role `user`, a tool source, one tool-result block).
        message: req Message = "message",
        /// The failure, when the tool failed.
        error: opt ToolError = "error",
        /// Tool-specific metadata.
        meta: opt Value = "meta",
    }
}

vocab_struct! {
    /// A tool failure: `{name, code}` (for example `TOOL_NOT_STARTED`).
    pub struct ToolError {
        /// The error's name.
        name: req String = "name",
        /// The error's code.
        code: req String = "code",
    }
}

vocab_struct! {
    /// `assistant/chunk` data: `{turn, step, chunk}`.
    pub struct AssistantChunk {
        /// The turn number.
        turn: req u64 = "turn",
        /// The step number.
        step: req u64 = "step",
        /// The raw stream chunk.
        chunk: req StreamChunk = "chunk",
    }
}

vocab_enum! {
    /// A raw stream chunk (tagged by `type`).
    pub enum StreamChunk tag "type" default TextDelta {
        /// `{type:"block-start", index, blockType}`.
        BlockStart(BlockStart) = "block-start",
        /// `{type:"text-delta", index, text}`.
        TextDelta(Delta) = "text-delta",
        /// `{type:"reasoning-delta", index, text}`.
        ReasoningDelta(Delta) = "reasoning-delta",
        /// `{type:"tool-call-delta", index, id, name?, argumentsDelta}`.
        ToolCallDelta(ToolCallDelta) = "tool-call-delta",
        /// `{type:"block-end", index, block}`.
        BlockEnd(BlockEnd) = "block-end",
        /// `{type:"usage", usage}`.
        Usage(UsageChunk) = "usage",
        /// `{type:"finish", reason, replayState?}`.
        Finish(Finish) = "finish",
    }
}

vocab_struct! {
    /// The fields of a block start.
    pub struct BlockStart {
        /// The block's index in the message.
        index: req u64 = "index",
        /// The block's type.
        block_type: req String = "blockType",
    }
}

vocab_struct! {
    /// The fields of a text or reasoning delta.
    pub struct Delta {
        /// The block's index.
        index: req u64 = "index",
        /// The text added.
        text: req String = "text",
    }
}

vocab_struct! {
    /// The fields of a tool-call delta.
    pub struct ToolCallDelta {
        /// The block's index.
        index: req u64 = "index",
        /// The call id.
        id: req String = "id",
        /// The tool name, when known.
        name: opt String = "name",
        /// The arguments text added.
        arguments_delta: req String = "argumentsDelta",
    }
}

vocab_struct! {
    /// The fields of a block end.
    pub struct BlockEnd {
        /// The block's index.
        index: req u64 = "index",
        /// The finished block.
        block: req ContentBlock = "block",
    }
}

vocab_struct! {
    /// The fields of a usage chunk.
    pub struct UsageChunk {
        /// The usage so far.
        usage: req Usage = "usage",
    }
}

vocab_struct! {
    /// The fields of a finish chunk.
    pub struct Finish {
        /// Why the stream finished.
        reason: req FinishReason = "reason",
        /// Provider state for replaying the response.
        replay_state: opt Value = "replayState",
    }
}

vocab_enum! {
    /// Why a stream finished (tagged by `kind`).
    pub enum FinishReason tag "kind" default Stop {
        /// `{kind:"stop"}`.
        Stop(Bare) = "stop",
        /// `{kind:"tool-calls"}`.
        ToolCalls(Bare) = "tool-calls",
        /// `{kind:"max-tokens"}`.
        MaxTokens(Bare) = "max-tokens",
        /// `{kind:"aborted", failure}`.
        Aborted(Failed) = "aborted",
        /// `{kind:"error", failure}`.
        Error(Failed) = "error",
    }
}

vocab_struct! {
    /// The fields of an aborted or failed finish.
    pub struct Failed {
        /// The failure.
        failure: req LlmFailure = "failure",
    }
}
