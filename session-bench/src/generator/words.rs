//! Word lists and phrase tables for the synthetic prose, code and tool output.

/// Closed-class words.
pub(crate) const FUNCTION: &str = "the a an of to in for on with at by from as into about after before over under between \
    through during without within and or but so if then than because while when where which \
    that this these those it its they them their we our you your i me my is are was were be \
    been being has have had do does did not no can could should would will may might must just \
    only also still even already again now here there very more most less some any each every \
    all both either neither other another such same first last next one two three";

/// Technical nouns.
pub(crate) const NOUN: &str = "file function test module struct field method value type error result option buffer reader \
    writer parser token line column offset length index entry record batch frame header \
    payload event session turn step message chunk block tool call argument output input \
    request response stream channel queue cache map list vector slice string byte path \
    directory root project crate package dependency feature flag config setting default limit \
    timeout retry counter state transition invariant assertion check guard handle lock mutex \
    thread task future runtime loop iterator closure trait impl enum variant match branch case \
    pattern regex query schema table row key id sequence number timestamp clock window range \
    bound edge boundary fixture snapshot spec benchmark profile allocation copy clone \
    reference pointer lifetime borrow owner scope context service plugin hook listener \
    callback handler pipeline decoder encoder codec checksum compression frame magic \
    descriptor segment prefix suffix tail head cursor position delta diff patch commit branch \
    merge conflict build compiler warning lint format layout manifest version release \
    migration legacy fallback default policy mode sandbox permission approval user model \
    provider usage budget summary replacement surface node generation order count";

/// General English vocabulary.
pub(crate) const GENERAL: &str = "ability able absence absolute accept access accident account accurate achieve acquire \
    across act action active actual adapt addition address adequate adjust admit adopt advance \
    advantage advice affect afford agency agenda agree ahead aim alarm album alert align alive \
    alter amount analysis ancient angle announce annual answer anxiety apart apparent appeal \
    appear apply approach approve area argue arise arrange arrival article aside aspect assess \
    assign assist associate assume attach attempt attend attention attitude attract audience \
    author authority automatic available average avoid award aware balance ban band bank bar \
    base basic basis bear beat beauty become begin behalf behavior behind belief belong below \
    benefit beside best better beyond bias bill bind bit blame blank blind blow board body \
    bold bone bonus book border borrow bother bottom brain brand brave break brief bright \
    bring broad budget burden burn business busy button cable calculate camera campaign \
    capable capacity capital capture care career careful carry category cause caution central \
    century certain chain chair challenge chance channel chapter character charge chart cheap \
    choice choose circle citizen claim class classic clear climate climb close cloud coach \
    code coffee collapse collect college column combine comfort command comment commit common \
    community company compare compete complain complete component concept concern conclude \
    condition conduct confidence confirm conflict connect consider consist constant construct \
    consume contact contain content contest continue contract contrast contribute control \
    convert convince cook cool cope core corner cost council country couple courage course \
    cover craft crash crazy create credit crew crisis criteria critical cross crowd crucial \
    culture curious current curve custom cycle damage danger dark data deal debate decade \
    decide declare decline decrease deep defeat defend define degree delay deliver demand \
    demonstrate deny depend deploy depth derive describe design desire desk despite destroy \
    detail detect determine develop device differ difficult digital dimension direct discover \
    discuss display distance distinct divide document domain dominant double doubt draft drag \
    drama draw dream drive driver due duty dynamic early earn ease economy edge edition effect \
    effort elect element eliminate else embrace emerge emphasis employ enable encounter \
    encourage end energy engage engine enhance enjoy enormous ensure enter entire environment \
    equal equipment escape essential establish estimate evaluate evening evidence evolve exact \
    examine example exceed excellent except exchange exclude exercise exist expand expect \
    experience experiment expert explain explore expose express extend extent extreme face \
    factor fail fair faith familiar famous far fashion fault favor fear feature fee feed feel \
    fellow few fiction fight figure fill film final finance find fine finish fire firm fit fix \
    flexible flight float floor flow focus fold follow force foreign forget form formal former \
    forward found frame free frequent friend front fuel function fund fundamental future gain \
    gap gather general generate gentle genuine gift global goal govern grab grade grant great \
    green ground group grow growth guarantee guess guide habit half hand handle hang happen \
    hard harm head health hear heat heavy height help hidden high highlight hire history hold \
    hole holiday honest hope horizon host huge human humor hunt ideal identify ignore \
    illustrate image imagine impact implement imply import impose improve incident include \
    income increase indeed indicate individual industry influence inform initial injury inner \
    innocent insight insist install instance instead institution intend intense interest \
    interpret interval introduce invest investigate invite involve island issue item join \
    journey judge jump junior justify kind knowledge label labor lack language large latter \
    launch lay layer lead learn least leave legal lesson level library lie light likely limit \
    link listen little live local locate logic lose loss lot low machine main maintain major \
    manage manner margin mark market master material matter mean measure medium member memory \
    mention merely method middle mind minor minute mirror miss mission mistake mix modern \
    modest moment monitor month mood moral motion motor mount move multiple narrow nation \
    natural nature near necessary negative neither network nice noise normal notice notion \
    novel numerous object objective obtain obvious occasion occur odd offer office official \
    open operate opinion opportunity oppose option ordinary organize origin outcome outside \
    overall own pace pack page pair panel paper parent part participate particular partner \
    party pass past patient pattern pause pay peak perform period permit person phase phone \
    physical pick picture piece pilot place plan plant plate play plenty point pool popular \
    portion pose positive possible potential power practice precise predict prefer prepare \
    presence present preserve press pressure pretty prevent price pride primary prime \
    principle print prior priority private problem proceed process produce product \
    professional program progress promise promote proof proper property proportion propose \
    protect prove provide public pull purpose push quality quarter question quick quiet quite \
    quote race raise random rapid rare rate rather reach react ready real reason recall \
    receive recent recognize recommend recover reduce reflect reform refuse regard region \
    regular reject relate relative release relevant rely remain remark remember remote repair \
    repeat replace reply represent request require research reserve resist resolve resource \
    respond rest restrict retain retire reveal review reward rich rise risk role rough round \
    route routine rule safety sample save scale scene schedule scheme science score screen \
    search season seat second secret section secure seek seem select sense sensitive sentence \
    separate series serious serve settle severe shape share sharp shift shoot shortly show \
    side sign signal significant silent similar simple single site situation size skill smart \
    smooth social soft solid solution solve sort source space spare speak special specific \
    speed spend spirit split spot spread square stable staff stage stand standard start \
    statement station status steady stick stock stop store story straight strange strategy \
    street strength stress stretch strike strong structure struggle student study stuff style \
    subject submit succeed success sudden suffer suggest suit supply support suppose sure \
    surprise survey survive suspect sustain switch symbol system tackle talent talk target \
    teach team technique technology tell tend term terrible text theme theory thick thin \
    thought threat threshold throw tight tiny tip title tone topic total touch tough track \
    trade tradition traffic train transfer transform travel treat trend trial trick trouble \
    true trust truth turn typical ultimate unable unclear understand union unit unless \
    unlikely upper urge usual valuable variety various vast venture verify view visible vision \
    visit voice volume vote wage wait walk wall want warn waste watch wave way weak wealth \
    weight welcome whole wide wild willing win wise wish witness wonder wood word work worker \
    world worry worth wrap yield young zone";

/// Third-person verbs.
pub(crate) const VERB: &str = "returns calls handles checks needs uses expects reads writes parses builds creates updates \
    removes replaces appends inserts skips ignores rejects accepts validates decodes encodes \
    flushes truncates repairs loads stores compares matches splits joins maps filters sorts \
    converts wraps unwraps clones copies moves drops locks waits spawns polls yields emits \
    records tracks counts measures logs reports fails passes panics breaks fixes covers \
    exercises triggers prevents allows requires guarantees assumes owns borrows holds keeps";

/// Base-form verbs.
pub(crate) const VERB_BASE: &str = "check look read run fix add update change remove rename move test verify inspect trace \
    search find compare refactor simplify extract inline implement handle cover confirm try \
    rerun rebuild revert restore review clean document split merge keep use make write";

/// Adjectives.
pub(crate) const ADJ: &str = "new old current previous next last first empty full partial torn valid invalid missing \
    extra wrong right correct broken stale fresh large small long short simple complex \
    internal external public private mutable immutable async sync blocking raw packed \
    compressed plain unique duplicate optional required default explicit implicit strict \
    lenient safe unsafe fast slow cheap expensive stable flaky deterministic contiguous sparse \
    dense nested flat recursive iterative lazy eager durable volatile";

/// Adverbs.
pub(crate) const ADV: &[&str] = &[
    "now",
    "actually",
    "probably",
    "definitely",
    "clearly",
    "simply",
    "already",
    "still",
    "again",
    "instead",
    "also",
    "currently",
    "correctly",
    "directly",
    "quickly",
    "carefully",
    "explicitly",
    "eventually",
    "finally",
    "only",
];

/// Sentence openers that take a verb.
pub(crate) const OPENERS: &[&str] = &[
    "Let me",
    "Now let me",
    "I need to",
    "I should",
    "Let's",
    "First, let me",
    "Next, I'll",
    "OK, let me",
    "Good. Now I'll",
    "Wait, I should",
    "Hmm, let me",
    "Alright, I'll",
];

/// Sentence openers that take a clause.
pub(crate) const STARTERS: &[&str] = &[
    "The issue is that",
    "It looks like",
    "I think",
    "So",
    "Actually,",
    "Wait,",
    "Hmm,",
    "This means",
    "The problem is",
    "Looking at this,",
    "I see:",
    "OK so",
    "Note that",
    "The test shows that",
    "From the output,",
    "Interesting:",
    "That explains why",
];

/// Sentence endings.
pub(crate) const ENDINGS: &[&str] = &[
    ".",
    ".",
    ".",
    ".",
    ".",
    ":",
    "?",
    ". Let me check.",
    ", which is expected.",
    " - that is the bug.",
    ".\n\n",
    ".\n",
];

/// Non-Latin prompt prefixes.
pub(crate) const CJK_PHRASES: &[&str] = &[
    "请检查这个函数的实现",
    "把测试跑一遍",
    "修复这个问题",
    "这个文件需要重构",
    "为什么会失败",
    "先看一下日志",
    "性能有点慢",
    "继续下一步",
    "帮我解释一下",
    "没有问题了",
];

/// Syllables of invented names.
pub(crate) const SYLLABLES: &str = "ab ac ad al an ar as at ba be bi bo ca ce ch co cu da de di do du ed el em en er es ex fa \
    fe fi fo ga ge gi go ha he hi ho id il im in io is it ka ke la le li lo lu ma me mi mo mu \
    na ne ni no nu ob od ol om on op or os ot pa pe pi po pr qu ra re ri ro ru sa se si so st \
    su ta te th ti to tr tu ul um un up ur us ut va ve vi vo wa we wi xa ya yo za ze";

/// Rust types used in signatures.
pub(crate) const RUST_TYPES: &[&str] = &[
    "u8",
    "u16",
    "u32",
    "u64",
    "usize",
    "i64",
    "bool",
    "String",
    "&str",
    "Vec<u8>",
    "Option<u64>",
    "Result<(), Error>",
    "Bytes",
    "PathBuf",
    "&Path",
    "Duration",
    "Arc<Mutex<State>>",
    "HashMap<String, u64>",
    "Box<dyn Error>",
    "serde_json::Value",
];

/// TypeScript types used in signatures.
pub(crate) const TS_TYPES: &[&str] = &[
    "string",
    "number",
    "boolean",
    "unknown",
    "void",
    "Buffer",
    "Uint8Array",
    "Promise<void>",
    "SessionId",
    "SessionEvent[]",
    "readonly string[]",
    "Record<string, unknown>",
    "AbortSignal",
    "Map<string, number>",
];

/// Error variants in generated code.
pub(crate) const ERR_VARIANTS: &[&str] = &[
    "Corrupt", "Torn", "Io", "Parse", "Version", "Gap", "Identity", "Encoding", "Closed", "Busy",
    "NotFound", "Invalid",
];
