//! ChatML prompts (`<|im_start|>role\n…<|im_end|>\n`), as the chat templates of SmolLM2, Qwen and
//! their relatives render a single user message with `add_generation_prompt = True`.
//!
//! gptlens does not run Jinja. It recognizes the ChatML family in a `tokenizer.chat_template` and
//! reads the one thing that varies between its members for a one-message chat: the system prompt
//! the template inserts when the conversation has none. SmolLM2's template does insert one:
//!
//! ```text
//! <|im_start|>system
//! You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
//! <|im_start|>user
//! {user text}<|im_end|>
//! <|im_start|>assistant
//! ```

use crate::error::{Error, Result};

const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// How a ChatML template wraps one user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMl {
    default_system: Option<String>,
}

impl ChatMl {
    /// A plain ChatML wrapper, with no default system prompt.
    pub fn new(default_system: Option<String>) -> Self {
        Self { default_system }
    }

    /// Reads a Jinja chat template. It must be ChatML (use `<|im_start|>`, `<|im_end|>` and a
    /// generation prompt); a default system prompt is a string literal in it that starts with
    /// `<|im_start|>system` and a newline and runs to `<|im_end|>`.
    pub fn from_template(template: &str) -> Result<Self> {
        let is_chatml = template.contains(IM_START)
            && template.contains(IM_END)
            && template.contains("add_generation_prompt")
            && ["<|im_start|>assistant\n", "<|im_start|>assistant\\n"].iter().any(|prompt| template.contains(prompt));
        if !is_chatml {
            return Err(Error::Tokenizer(
                "the chat template is not ChatML (<|im_start|>role … <|im_end|>); gptlens cannot render it".into(),
            ));
        }
        Ok(Self { default_system: default_system_prompt(template) })
    }

    /// The system prompt added when the conversation brings none.
    pub fn default_system(&self) -> Option<&str> {
        self.default_system.as_deref()
    }

    /// One user message and the assistant's turn opened, with the default system prompt if the
    /// template has one: what `apply_chat_template([{"role": "user", "content": user_text}],
    /// add_generation_prompt=True)` renders.
    pub fn prompt(&self, user_text: &str) -> String {
        self.prompt_with_system(self.default_system.as_deref(), user_text)
    }

    /// Like [`ChatMl::prompt`], with this system prompt (or none) in place of the default.
    pub fn prompt_with_system(&self, system: Option<&str>, user_text: &str) -> String {
        let mut prompt = String::new();
        if let Some(system) = system {
            push_turn(&mut prompt, "system", system);
        }
        push_turn(&mut prompt, "user", user_text);
        prompt.push_str(IM_START);
        prompt.push_str("assistant\n");
        prompt
    }
}

fn push_turn(prompt: &mut String, role: &str, content: &str) {
    prompt.push_str(IM_START);
    prompt.push_str(role);
    prompt.push('\n');
    prompt.push_str(content);
    prompt.push_str(IM_END);
    prompt.push('\n');
}

/// The literal system prompt in `…'<|im_start|>system\nTEXT<|im_end|>\n'…`, with the newline
/// written either as is or as the escape `\n`. Text that contains template syntax or quotes is
/// not a literal (it is how a template splices in a system message of its own) and is skipped.
fn default_system_prompt(template: &str) -> Option<String> {
    let opener = format!("{IM_START}system");
    let mut rest = template;
    while let Some(at) = rest.find(&opener) {
        rest = &rest[at + opener.len()..];
        let Some(body) = rest.strip_prefix('\n').or_else(|| rest.strip_prefix("\\n")) else {
            continue;
        };
        let Some(end) = body.find(IM_END) else {
            continue;
        };
        let text = &body[..end];
        let literal = !["{{", "}}", "{%", "%}", "'", "\""].iter().any(|syntax| text.contains(syntax));
        if literal {
            return Some(text.replace("\\n", "\n"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's `tokenizer.chat_template`, newlines and all.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_template_adds_its_system_prompt() {
        let chat = ChatMl::from_template(SMOLLM2).unwrap();
        assert_eq!(chat.default_system(), Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
        assert_eq!(
            chat.prompt("Hi"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(chat.prompt_with_system(None, "Hi"), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn escaped_newlines_and_spliced_system_messages() {
        let escaped = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{%- endif %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        let chat = ChatMl::from_template(escaped).unwrap();
        assert_eq!(chat.default_system(), Some("You are Qwen."));

        let no_default = "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        assert_eq!(ChatMl::from_template(no_default).unwrap().default_system(), None);
    }

    #[test]
    fn other_templates_are_refused() {
        let llama3 = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}";
        let message = ChatMl::from_template(llama3).unwrap_err().to_string();
        assert!(message.contains("not ChatML"), "{message}");
    }
}
