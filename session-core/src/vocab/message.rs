//! Messages, content blocks and message sources (`dsh-llm`'s shapes).

use crate::json::{SerdeError, SerdeErrorKind, Value};
use crate::vocab::Extra;
use crate::vocab::fields::{Field, invalid_type};

/// A message's `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// `"system"`.
    System,
    /// `"user"` (also tool results).
    #[default]
    User,
    /// `"assistant"`.
    Assistant,
}

impl Role {
    /// The JSON string.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl Field for Role {
    fn read(v: &Value) -> Result<Role, SerdeError> {
        match v.as_str() {
            Some("system") => Ok(Role::System),
            Some("user") => Ok(Role::User),
            Some("assistant") => Ok(Role::Assistant),
            Some(other) => Err(SerdeError::new(SerdeErrorKind::Message(format!(
                "unknown variant `{other}`, expected one of `system`, `user`, `assistant`"
            )))),
            None => Err(invalid_type(v, "a role string")),
        }
    }
    fn write(&self) -> Result<Value, SerdeError> {
        Ok(Value::from(self.as_str()))
    }
}

vocab_struct! {
    /// A message: the `data` of `user/message`, the `message` of `assistant/message` and
    /// `tool/result`.
    pub struct Message {
        /// The message id (non-empty).
        id: req String = "id",
        /// Who speaks.
        role: req Role = "role",
        /// The content blocks.
        content: req Vec<ContentBlock> = "content",
        /// Where the message came from.
        source: req MessageSource = "source",
    }
}

vocab_enum! {
    /// A content block (an open set, tagged by `type`).
    pub enum ContentBlock tag "type" default Text {
        /// `{type:"text", text}`.
        Text(TextBlock) = "text",
        /// `{type:"reasoning", text}`.
        Reasoning(TextBlock) = "reasoning",
        /// `{type:"tool-call", id, name, arguments}`.
        ToolCall(ToolCallBlock) = "tool-call",
        /// `{type:"tool-result", toolCallId, content, isError?}`.
        ToolResult(ToolResultBlock) = "tool-result",
        /// `{type:"image", attachment}`.
        Image(ImageBlock) = "image",
    }
}

vocab_struct! {
    /// The fields of a text or reasoning block.
    pub struct TextBlock {
        /// The text.
        text: req String = "text",
    }
}

vocab_struct! {
    /// The fields of a tool-call block.
    pub struct ToolCallBlock {
        /// The call id.
        id: req String = "id",
        /// The tool name.
        name: req String = "name",
        /// The arguments as the model produced them (a JSON string in the reference's logs).
        arguments: req Value = "arguments",
    }
}

vocab_struct! {
    /// The fields of a tool-result block.
    pub struct ToolResultBlock {
        /// The id of the call this answers.
        tool_call_id: req String = "toolCallId",
        /// The result's content.
        content: req Vec<ContentBlock> = "content",
        /// Whether the tool failed.
        is_error: opt bool = "isError",
    }
}

vocab_struct! {
    /// The fields of an image block.
    pub struct ImageBlock {
        /// The stored image.
        attachment: req Attachment = "attachment",
    }
}

vocab_struct! {
    /// A stored image attachment.
    pub struct Attachment {
        /// The attachment id (for example `sha256:…`).
        attachment_id: req String = "attachmentId",
        /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
        media_type: req String = "mediaType",
        /// The size in bytes.
        bytes: req u64 = "bytes",
        /// Width in pixels.
        width: req u64 = "width",
        /// Height in pixels.
        height: req u64 = "height",
        /// The file name.
        name: opt String = "name",
        /// The size before downscaling.
        original_dimensions: opt Dimensions = "originalDimensions",
    }
}

vocab_struct! {
    /// A width and a height in pixels.
    pub struct Dimensions {
        /// Width in pixels.
        width: req u64 = "width",
        /// Height in pixels.
        height: req u64 = "height",
    }
}

vocab_enum! {
    /// Where a message came from (an open set, tagged by `kind`).
    pub enum MessageSource tag "kind" default User {
        /// `{kind:"user"}`.
        User(Bare) = "user",
        /// `{kind:"model", provider, model, replayState?}`.
        Model(ModelSource) = "model",
        /// `{kind:"tool", callId}`.
        Tool(ToolSource) = "tool",
        /// `{kind:"plugin", plugin, form?, sections?, summary?}`.
        Plugin(PluginSource) = "plugin",
    }
}

vocab_struct! {
    /// A tagged object with no other named fields.
    pub struct Bare {}
}

vocab_struct! {
    /// The fields of a model source.
    pub struct ModelSource {
        /// The provider.
        provider: req String = "provider",
        /// The model.
        model: req String = "model",
        /// Provider state for replaying the response.
        replay_state: opt Value = "replayState",
    }
}

vocab_struct! {
    /// The fields of a tool source.
    pub struct ToolSource {
        /// The id of the call the result answers.
        call_id: req String = "callId",
    }
}

vocab_struct! {
    /// The fields of a plugin source.
    pub struct PluginSource {
        /// The plugin's name.
        plugin: req String = "plugin",
        /// `instructions`, `catalog`, `snapshot`, `notice`, `relay` or `recall`.
        form: opt String = "form",
        /// The sections of a snapshot.
        sections: opt Vec<Section> = "sections",
        /// The summary of a notice.
        summary: opt String = "summary",
    }
}

vocab_struct! {
    /// A named section of a snapshot.
    pub struct Section {
        /// The section's name.
        name: req String = "name",
        /// The section's text.
        text: req String = "text",
    }
}

impl Message {
    /// A message with these parts and no other fields.
    pub fn new(
        id: impl Into<String>,
        role: Role,
        content: Vec<ContentBlock>,
        source: MessageSource,
    ) -> Message {
        Message {
            id: id.into(),
            role,
            content,
            source,
            extra: Extra::default(),
        }
    }

    /// A user message of one text block, from the user.
    pub fn user_text(id: impl Into<String>, text: impl Into<String>) -> Message {
        Message::new(
            id,
            Role::User,
            vec![ContentBlock::text(text)],
            MessageSource::User(Bare::default()),
        )
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextBlock {
            text: text.into(),
            extra: Extra::default(),
        })
    }
}
