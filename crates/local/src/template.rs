//! The chat template of a model: the Jinja template in the GGUF metadata
//! (`tokenizer.chat_template`), rendered with minijinja and its Python
//! compatibility layer; ChatML when the file has none or it fails to render.

use companiond_core::llm::ChatMessage;
use minijinja::{context, Environment, Error, ErrorKind};
use serde_json::{json, Value};

/// ChatML, the fallback template.
pub const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A compiled chat template.
pub struct Template {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

fn raise_exception(msg: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

impl Template {
    pub fn new(source: Option<&str>, bos: &str, eos: &str) -> Template {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |fmt: String| -> String {
            let _ = fmt;
            String::new()
        });
        let ok = source.is_some_and(|s| env.add_template_owned("chat", s.to_string()).is_ok());
        if !ok {
            let _ = env.add_template("chat", CHATML);
        }
        Template {
            env,
            bos: bos.to_string(),
            eos: eos.to_string(),
        }
    }

    /// The prompt of `messages`, ending with the assistant's turn opened.
    pub fn render(&self, messages: &[ChatMessage]) -> String {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| {
                let role = match m.role.as_str() {
                    "tool" => "user",
                    r => r,
                };
                json!({"role": role, "content": m.content.clone().unwrap_or_default()})
            })
            .collect();
        let render = |env: &Environment<'static>, msgs: &[Value]| -> Result<String, Error> {
            env.get_template("chat")?.render(context! {
                messages => msgs,
                add_generation_prompt => true,
                bos_token => self.bos,
                eos_token => self.eos,
            })
        };
        let first = match render(&self.env, &msgs) {
            Ok(s) => return s,
            Err(e) => e,
        };
        // Templates that refuse a system role (Gemma's raises) or turns that
        // do not alternate: the system prompt folded into the first user
        // turn, consecutive turns of one role joined.
        let folded = fold(&msgs);
        if folded != msgs {
            if let Ok(s) = render(&self.env, &folded) {
                return s;
            }
        }
        tracing::debug!("the model's chat template failed ({first}); using ChatML");
        let mut env = Environment::new();
        let _ = env.add_template("chat", CHATML);
        render(&env, &msgs).unwrap_or_default()
    }
}

/// `msgs` with the system messages put at the start of the first user
/// message (which opens the conversation) and consecutive messages of one
/// role joined by a blank line.
fn fold(msgs: &[Value]) -> Vec<Value> {
    let text = |m: &Value, k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let system: Vec<String> = msgs
        .iter()
        .filter(|m| text(m, "role") == "system")
        .map(|m| text(m, "content"))
        .filter(|c| !c.is_empty())
        .collect();
    let mut out: Vec<(String, String)> = Vec::new();
    for m in msgs.iter().filter(|m| text(m, "role") != "system") {
        let (role, content) = (text(m, "role"), text(m, "content"));
        match out.last_mut() {
            Some(last) if last.0 == role => {
                last.1.push_str("\n\n");
                last.1.push_str(&content);
            }
            _ => out.push((role, content)),
        }
    }
    let sys = system.join("\n\n");
    match out.first_mut() {
        // A conversation that opens with the assistant (a greeting) gets a
        // first user turn: the system prompt, or nothing.
        Some(first) if first.0 == "user" => {
            if !sys.is_empty() {
                first.1 = format!("{sys}\n\n{}", first.1);
            }
        }
        _ => out.insert(0, ("user".into(), sys)),
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_template_with_python_methods() {
        let src = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are helpful.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'].strip() + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let t = Template::new(Some(src), "", "<|im_end|>");
        let p = t.render(&[ChatMessage::user(" hi ")]);
        assert_eq!(
            p,
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let t = Template::new(Some("{{ broken"), "", "");
        assert!(t
            .render(&[ChatMessage::user("x")])
            .contains("<|im_start|>user\nx"));
    }

    /// Gemma 3's template takes the system prompt into the first user turn
    /// itself (`is string`, `trim`, whitespace control).
    #[test]
    fn gemma3_style_template() {
        let src = "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n{%- if messages[0]['content'] is string -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- else -%}{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}{%- endif -%}\n{%- set loop_messages = messages[1:] -%}\n{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}\n{%- for message in loop_messages -%}\n{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception('Conversation roles must alternate') }}{%- endif -%}\n{%- if (message['role'] == 'assistant') -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}\n{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}\n{%- if message['content'] is string -%}{{ message['content'] | trim }}{%- endif -%}\n{{ '<end_of_turn>\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}";
        let t = Template::new(Some(src), "<bos>", "<eos>");
        let p = t.render(&[ChatMessage::system("Be kind."), ChatMessage::user(" Hi ")]);
        assert_eq!(
            p,
            "<bos><start_of_turn>user\nBe kind.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    /// Gemma's template (1 and 2) raises on a system role and on turns that
    /// do not alternate.
    #[test]
    fn a_template_that_refuses_the_system_role() {
        let src = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";
        let t = Template::new(Some(src), "<bos>", "<eos>");
        let p = t.render(&[
            ChatMessage::system("You are kind."),
            ChatMessage::user("Hi"),
            ChatMessage::user("Still there?"),
        ]);
        assert_eq!(
            p,
            "<bos><start_of_turn>user\nYou are kind.\n\nHi\n\nStill there?<end_of_turn>\n<start_of_turn>model\n"
        );
        // Opening with the assistant's greeting.
        let p = t.render(&[
            ChatMessage::system("Be kind."),
            ChatMessage::assistant("Hello!"),
            ChatMessage::user("Hi"),
        ]);
        assert_eq!(
            p,
            "<bos><start_of_turn>user\nBe kind.<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
        let t = Template::new(Some("{{ broken"), "", "");
        assert!(t
            .render(&[ChatMessage::user("x")])
            .contains("<|im_start|>user\nx"));
    }
}
