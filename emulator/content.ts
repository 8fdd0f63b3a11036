/**
 * Fixed pools of text and names the data generator draws from. The texts carry what breaks naive
 * clients: emoji (surrogate pairs), CJK, combining marks, newlines, tabs, quotes, backslashes and
 * U+2028. Pools are combined once at load, so events share strings instead of each allocating one.
 */

const INPUT_OPENINGS: readonly string[] = [
  'How do I reset my password?',
  'Summarize this:\n\t- item one\n\t- item two',
  '请帮我翻译这段话：“你好，世界”',
  'Why does C:\\Users\\me\\report.txt fail to open?',
  'He said "hello" and left 👋',
  'データベースの接続がタイムアウトします。',
  'Write a haiku about rain 🌧️',
  '¿Dónde está la biblioteca?',
  'Regex for emails: ^[\\w.+-]+@\\w+\\.\\w+$',
  'Tab\tseparated\tvalues\there',
  'Can you refund order #4417?',
  '이 문서를 요약해 주세요',
  'Line one\nLine two\r\nLine three',
  'Café crème, naïve façade, e\u0301 (combining)',
  'What is the weather in Zürich today?',
  'Explain the difference between TCP and UDP',
  'JSON please: {"a": [1, 2, {"b": null}]}',
  'My 🐈‍⬛ knocked the 🍵 over, help',
  'Separator\u2028inside a line',
  'Translate to French: "the quick brown fox"',
];

const INPUT_FOLLOWUPS: readonly string[] = [
  '',
  ' Thanks!',
  ' Please be brief.',
  '\nContext: billing dashboard',
  ' 🙏',
  ' — urgent',
  ' (see attached)',
  '\n\n-- sent from mobile',
  ' 谢谢',
  ' It says "access denied".',
];

const OUTPUT_OPENINGS: readonly string[] = [
  'Sure! Here is what you can do:\n1. Open settings\n2. Click "Reset"',
  '当然可以。翻译如下：“Hello, world”',
  'The path C:\\Users\\me\\report.txt may be locked by another process.',
  'I could not find that order. Could you check the number?',
  'Rain on the window 🌧️\nsoft drums in the evening\nthe kettle answers',
  'La biblioteca está en la calle principal.',
  'TCP is connection-oriented; UDP is not.\tUDP has lower overhead.',
  'Here is the JSON: {"ok": true, "items": []}',
  '接続プールの設定を確認してください。',
  'Oh no! 🐈‍⬛🍵 Blot it with a towel first.',
  'Le renard brun rapide',
  'Your refund for order #4417 has been issued ✅',
  'Error: "access denied" usually means the token expired.',
  'Weather in Zürich: 4 °C, light snow ❄️',
  '요약: 이 문서는 분기 실적을 다룹니다.',
];

const OUTPUT_CLOSINGS: readonly string[] = [
  '',
  '\n\nAnything else?',
  ' Let me know if that helps!',
  ' 😊',
  '\n\n> quoted "reply" with \\backslash\\',
  ' Cheers.',
  '\n\t(indented note)',
];

function combine(openings: readonly string[], closings: readonly string[]): readonly string[] {
  const out: string[] = [];
  for (const opening of openings) for (const closing of closings) out.push(opening + closing);
  return out;
}

export const USER_INPUTS = combine(INPUT_OPENINGS, INPUT_FOLLOWUPS);
export const ASSISTANT_OUTPUTS = combine(OUTPUT_OPENINGS, OUTPUT_CLOSINGS);

export const EVENT_NAMES: readonly string[] = ['chat_message', 'completion', 'tool_use', 'feedback', 'agent_step'];
export const MODELS: readonly string[] = ['gpt-4o', 'claude-3-5-sonnet', 'gemini-1.5-pro', 'llama-3.1-70b'];
export const PROVIDERS: Readonly<Record<string, string>> = {
  'gpt-4o': 'openai',
  'claude-3-5-sonnet': 'anthropic',
  'gemini-1.5-pro': 'google',
  'llama-3.1-70b': 'meta',
};
export const PLANS: readonly string[] = ['free', 'pro', 'enterprise'];
export const REGIONS: readonly string[] = ['us-east-1', 'eu-west-1', 'ap-northeast-1'];
export const APP_VERSIONS: readonly string[] = ['1.8.2', '1.9.0', '2.0.0-beta.3'];
export const PLATFORMS: readonly string[] = ['web', 'ios', 'android'];
export const TAGS: readonly string[] = ['onboarding', 'billing', 'support', 'search', 'beta', 'vip', 'éxito', '中文'];
export const TOPICS: readonly string[] = [
  'billing',
  'account',
  'translation',
  'coding',
  'weather',
  'refunds',
  'poetry',
];
export const LOCALES: readonly string[] = ['en-US', 'fr-FR', 'ja-JP', 'zh-CN', 'es-ES', 'ko-KR', 'de-CH'];
export const USER_NAMES: readonly string[] = [
  'Ada Lovelace',
  'Grace Hopper',
  '山田 太郎',
  '李 小龙',
  'José Núñez',
  'Zoë "Z" O\'Brien',
  'Ørjan Ås',
  '김 민준',
  'Back\\slash Bob',
  'Émilie du Châtelet',
];

/** `span_type` values are the vendor SDK's enum (INTERNAL, LLM_GENERATION, LLM_GENERATION_STREAM, TOOL_CALL). */
export const SPAN_KINDS: readonly { readonly name: string; readonly type: string }[] = [
  { name: 'llm.call', type: 'LLM_GENERATION' },
  { name: 'retrieval.query', type: 'INTERNAL' },
  { name: 'tool.search_docs', type: 'TOOL_CALL' },
  { name: 'http.request', type: 'INTERNAL' },
  { name: 'embedding.create', type: 'INTERNAL' },
];
export const LLM_SPAN_TYPES: ReadonlySet<string> = new Set(['LLM_GENERATION', 'LLM_GENERATION_STREAM']);
/** `status` values are the vendor SDK's enum (UNSET, OK, ERROR). */
export const SPAN_STATUSES: readonly string[] = ['OK', 'OK', 'OK', 'OK', 'ERROR', 'UNSET'];

/** Signal groups of every project (the SDK's `/v1/signal-groups`); `group` below indexes this list. */
export const SIGNAL_GROUP_DEFINITIONS: readonly { readonly name: string; readonly description: string | null }[] = [
  { name: 'Quality', description: 'How good the answers are' },
  { name: 'Billing & orders', description: null },
  { name: 'Safety 🛡️', description: 'Refusals and shared personal data' },
  { name: 'Empty group', description: 'A group with no signals yet' },
];

/** `sentiment` is the SDK's enum (NEGATIVE, POSITIVE, NEUTRAL); `group` indexes the list above, or null. */
export const SIGNAL_DEFINITIONS: readonly {
  readonly type: string;
  readonly name: string;
  readonly description: string | null;
  readonly sentiment: string;
  readonly group: number | null;
}[] = [
  {
    type: 'topic',
    name: 'Billing questions',
    description: 'Conversations about invoices, refunds and plans',
    sentiment: 'NEUTRAL',
    group: 1,
  },
  {
    type: 'regex',
    name: 'Email address shared',
    description: 'Matches /[\\w.+-]+@[\\w-]+\\.[\\w.]+/ in user input',
    sentiment: 'NEUTRAL',
    group: 2,
  },
  {
    type: 'instrumented',
    name: 'Thumbs down',
    description: 'User pressed 👎 on an answer',
    sentiment: 'NEGATIVE',
    group: 0,
  },
  {
    type: 'metric',
    name: 'Slow response',
    description: 'Latency above the 95th percentile',
    sentiment: 'NEGATIVE',
    group: 0,
  },
  {
    type: 'code',
    name: 'Refusal detector',
    description: 'Custom code: assistant declined to answer',
    sentiment: 'NEGATIVE',
    group: 2,
  },
  { type: 'topic', name: '翻訳リクエスト', description: null, sentiment: 'NEUTRAL', group: null },
  {
    type: 'instrumented',
    name: 'Copied answer',
    description: 'User copied the assistant "output"',
    sentiment: 'POSITIVE',
    group: 0,
  },
  { type: 'regex', name: 'Order number', description: 'Matches #\\d{4}', sentiment: 'NEUTRAL', group: 1 },
];
