//! Request headers and route metadata.

use crate::json::Value;

vocab_struct! {
    /// `request/header` data: `{header, reason}`.
    pub struct RequestHeaderData {
        /// The header.
        header: req EpochHeader = "header",
        /// `initial`, `resume` or `change` (`fallback` is refused on append).
        reason: req String = "reason",
    }
}

vocab_struct! {
    /// What every request of an epoch sends: `{config, adapterDefaults?, system?, tools?}`.
    pub struct EpochHeader {
        /// The call configuration.
        config: req CallConfig = "config",
        /// Which `config` fields are adapter defaults.
        adapter_defaults: opt AdapterDefaults = "adapterDefaults",
        /// The system prompt.
        system: opt String = "system",
        /// The tools offered.
        tools: opt Vec<ToolSchema> = "tools",
    }
}

vocab_struct! {
    /// A model call's configuration.
    pub struct CallConfig {
        /// The provider (non-empty).
        provider: req String = "provider",
        /// The model (non-empty).
        model: req String = "model",
        /// The reasoning effort (non-empty when present).
        reasoning_effort: opt String = "reasoningEffort",
        /// The sampling temperature.
        temperature: opt f64 = "temperature",
        /// The completion token limit.
        max_tokens: opt u64 = "maxTokens",
        /// Stop sequences.
        stop: opt Vec<String> = "stop",
    }
}

vocab_struct! {
    /// Markers (`true`) for `config` fields that are adapter defaults.
    pub struct AdapterDefaults {
        /// `reasoningEffort` is the adapter's default.
        reasoning_effort: opt bool = "reasoningEffort",
        /// `maxTokens` is the adapter's default.
        max_tokens: opt bool = "maxTokens",
    }
}

vocab_struct! {
    /// A tool offered to the model: `{name, description, parameters}`.
    pub struct ToolSchema {
        /// The tool name.
        name: req String = "name",
        /// What it does.
        description: req String = "description",
        /// Its JSON Schema.
        parameters: req Value = "parameters",
    }
}

vocab_struct! {
    /// `request/context` data: `{provider, model, contextWindow?}`.
    pub struct RequestContext {
        /// The provider.
        provider: req String = "provider",
        /// The model.
        model: req String = "model",
        /// The context window in tokens.
        context_window: opt u64 = "contextWindow",
    }
}
