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
        let render = |env: &Environment<'static>| -> Result<String, Error> {
            env.get_template("chat")?.render(context! {
                messages => msgs,
                add_generation_prompt => true,
                bos_token => self.bos,
                eos_token => self.eos,
            })
        };
        match render(&self.env) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("the model's chat template failed ({e}); using ChatML");
                let mut env = Environment::new();
                let _ = env.add_template("chat", CHATML);
                render(&env).unwrap_or_default()
            }
        }
    }
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
}
